// listen_address_problem: an impossible IPv4 address is "invalid address" without a DNS lookup, a
// port with a listener is "address already in use", a free one has no problem.
#include "server/listen_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace qs {
namespace {

// A socket listening on 127.0.0.1 at an ephemeral port; port() tells which.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(fd_, 1) == 0;
    socklen_t len = sizeof addr;
    if (ok_) ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  int port_ = 0;
};

TEST(ListenAddress, ImpossibleIpv4AddressIsInvalidAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(listen_address_problem("999.1.1.1", 8080), "invalid address");
  EXPECT_EQ(listen_address_problem("1.2.3.4.5", 8080), "invalid address");
  EXPECT_EQ(listen_address_problem("::zz", 8080), "invalid address");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << "no DNS lookup";
}

TEST(ListenAddress, PortWithAListenerIsInUse) {
  Listener busy;
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(listen_address_problem("127.0.0.1", busy.port()), "address already in use");
}

TEST(ListenAddress, FreePortAndAnyPortHaveNoProblem) {
  int port = 0;
  {
    Listener probe;  // an ephemeral port that is free once closed
    ASSERT_TRUE(probe.ok());
    port = probe.port();
  }
  EXPECT_EQ(listen_address_problem("127.0.0.1", port), "");
  EXPECT_EQ(listen_address_problem("127.0.0.1", 0), "");
}

TEST(ListenAddress, AddressOfAnotherMachineIsNotAvailable) {
  // 192.0.2.1 (TEST-NET-1, RFC 5737) is assigned to no local interface.
  EXPECT_EQ(listen_address_problem("192.0.2.1", 0), "address not available on this machine");
}

TEST(ListenAddress, BindErrorsInWords) {
  EXPECT_EQ(bind_error_reason(EADDRINUSE), "address already in use");
  EXPECT_EQ(bind_error_reason(EADDRNOTAVAIL), "address not available on this machine");
}

}  // namespace
}  // namespace qs
