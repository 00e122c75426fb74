// The disconnect probe of non-streaming responses, on a real loopback TCP connection: the
// server-side socket is found by its addresses, reads as connected (also with unread pipelined
// bytes), and as closed once the client closes its end.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/client_socket.h"
#include "server/request_deadline.h"

namespace qs {
namespace {

int port_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// A loopback connection: listener, client and the accepted server side (-1 where a call failed).
struct LoopbackConnection {
  int listener = -1, client = -1, accepted = -1, server_port = 0;
  bool open() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listener, 4) != 0) return false;
    server_port = port_of(listener, false);
    client = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_port = htons(static_cast<uint16_t>(server_port));
    if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
    accepted = accept(listener, nullptr, nullptr);
    return accepted >= 0;
  }
};

TEST(ClientSocket, FindsTheConnectionAndSeesTheClientClose) {
  LoopbackConnection conn;
  ASSERT_TRUE(conn.open());
  const int listener = conn.listener, client = conn.client, accepted = conn.accepted, server_port = conn.server_port;

  const int client_port = port_of(client, false);
  EXPECT_EQ(find_client_socket("127.0.0.1", client_port, server_port), accepted);
  EXPECT_EQ(find_client_socket("127.0.0.1", client_port + 1, server_port), -1);
  auto gone = disconnect_probe("127.0.0.1", client_port, server_port);
  EXPECT_FALSE(gone());
  ASSERT_EQ(write(client, "GET / HTTP/1.1\r\n", 16), 16);  // a pipelined request: still connected
  EXPECT_FALSE(gone());
  close(client);
  for (int i = 0; i < 100 && !gone(); ++i) usleep(1000);
  // Unread bytes come before the end of stream: drain them the way httplib would later.
  char buf[64];
  while (recv(accepted, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
  EXPECT_TRUE(peer_closed(accepted));
  close(accepted);
  close(listener);
}

// Inside serve_connection (the server's HTTP thread) the probe takes the socket that thread serves
// instead of scanning every descriptor of the process (which raced with other HTTP threads
// closing theirs: TSan under the chaos e2e test).
TEST(ClientSocket, ProbeInsideServeConnectionUsesTheServedSocket) {
  LoopbackConnection conn;
  ASSERT_TRUE(conn.open());
  const int listener = conn.listener, client = conn.client, accepted = conn.accepted, server_port = conn.server_port;
  const int client_port = port_of(client, false);

  EXPECT_EQ(request_deadline::current_socket(), -1);
  std::function<bool()> gone;
  request_deadline::serve_connection(accepted, [&] {
    EXPECT_EQ(request_deadline::current_socket(), accepted);
    gone = disconnect_probe("127.0.0.1", client_port, server_port);
  });
  EXPECT_EQ(request_deadline::current_socket(), -1);
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone());
  close(client);
  for (int i = 0; i < 100 && !gone(); ++i) usleep(1000);
  EXPECT_TRUE(gone());
  close(accepted);
  close(listener);
}

}  // namespace
}  // namespace qs
