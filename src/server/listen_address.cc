#include "server/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace qs {
namespace {

// Digits and dots only (a would-be IPv4 address such as 999.1.1.1) or an IPv6 literal: resolved
// numerically, so that a typo is "invalid address" at once instead of a DNS lookup.
bool looks_numeric(const std::string& host) {
  if (host.find(':') != std::string::npos) return true;
  if (host.empty()) return false;
  for (char c : host) {
    if (c != '.' && (c < '0' || c > '9')) return false;
  }
  return true;
}

}  // namespace

std::string bind_error_reason(int error_number) {
  switch (error_number) {
    case EADDRINUSE: return "address already in use";
    case EADDRNOTAVAIL: return "address not available on this machine";
    case EACCES: return "permission denied (ports below 1024 need privileges)";
    case 0: return "bind failed";  // no errno to tell why
    default: return std::strerror(error_number);
  }
}

std::string listen_address_problem(const std::string& host, int port) {
  if (port < 0 || port > 65535) return "port out of range 0..65535";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | (looks_numeric(host) ? AI_NUMERICHOST : 0);
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    return rc == EAI_NONAME || rc == EAI_FAIL || rc == EAI_ADDRFAMILY || rc == EAI_NODATA || rc == 0
               ? "invalid address"
               : std::string("invalid address (") + ::gai_strerror(rc) + ")";
  }
  int bind_errno = 0;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      bind_errno = errno;
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    const bool bound = ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (!bound) bind_errno = errno;
    ::close(fd);
    if (bound) {
      ::freeaddrinfo(result);
      return {};
    }
  }
  ::freeaddrinfo(result);
  return bind_error_reason(bind_errno);
}

}  // namespace qs
