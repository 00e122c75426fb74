#include "server/request_deadline.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace {

thread_local int t_accepted_socket = -1;
// The socket of the connection this thread serves (inside serve_connection), or -1.
thread_local int t_served_socket = -1;
// The connection this thread serves, while its request head is being read: the socket (-1 when not
// in the head phase) and the head bytes received so far.
thread_local int t_head_socket = -1;
thread_local size_t t_head_bytes = 0;
// The same while a chunked body is read: the socket (-1 otherwise) and the bytes received; the
// body may take chunked_wire_limit(g_max_body_bytes) on the wire (the --max-body-bytes given to
// configure()).
thread_local int t_body_socket = -1;
thread_local size_t t_body_bytes = 0;
thread_local bool t_anthropic = false;  // the request being read is a /v1/messages one
// close_after_response(): set while the response is handled, then the socket whose next read
// lingers and reports EOF.
thread_local bool t_close_requested = false;
thread_local int t_linger_socket = -1;
// The status of a reply written to the socket here (431, 413) for the request being read; 0: none.
thread_local int t_replied_status = 0;
std::atomic<size_t> g_max_body_bytes{0};  // 0: no cap on chunked bodies

constexpr char kHeadTooLarge[] =
    "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
    "Connection: close\r\nContent-Length: 138\r\n\r\n"
    "{\"error\":{\"message\":\"request head larger than 65536 bytes\",\"type\":\"invalid_request_error\","
    "\"param\":null,\"code\":\"request_header_too_large\"}}";

}  // namespace

// cpp-httplib (a shared library) calls accept(); the executable's definition takes precedence in
// the dynamic symbol lookup. Same behaviour as glibc's accept, plus remembering the socket.
extern "C" int accept(int fd, struct sockaddr* addr, socklen_t* addr_len) {
  const int socket = ::accept4(fd, addr, addr_len, 0);
  if (socket >= 0) t_accepted_socket = socket;
  return socket;
}

namespace {

// Lingering close (RFC 9112 9.6; nginx's lingering_close): after the server's last response and
// shutdown(SHUT_WR), read and discard what the client still sends, for at most kLingerSeconds and
// kLingerBytes, so that the close that follows finds no unread data. Closing with unread data makes
// the kernel answer with a reset, and a reset that reaches the client before it has read the
// response discards that response (the client would see ECONNRESET instead of the 413 or 431).
void drain_before_close(int fd) {
  char scratch[16384];
  size_t drained = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(qs::request_deadline::kLingerSeconds);
  while (drained < qs::request_deadline::kLingerBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t k = ::recvfrom(fd, scratch, sizeof scratch, MSG_DONTWAIT, nullptr, nullptr);
    if (k <= 0) break;
    drained += static_cast<size_t>(k);
  }
}

// Sends `reply` as the connection's last response, then closes it the lingering way.
void reply_and_linger(int fd, const char* reply, size_t size) {
  ::send(fd, reply, size, MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  drain_before_close(fd);
}

}  // namespace

// cpp-httplib reads requests with recv(); a head that grows past kMaxHeadBytes (cpp-httplib 0.11 has
// no limit on the number of headers, so a fast client could make it buffer gigabytes before the
// head deadline) gets a 431 and the connection ends (lingering close), which the read then reports
// as EOF. A chunked body past its wire limit gets a 413 the same way.
extern "C" ssize_t recv(int fd, void* buffer, size_t length, int flags) {
  if (fd == t_linger_socket && fd >= 0) {
    t_linger_socket = -1;
    drain_before_close(fd);
    return 0;
  }
  const ssize_t n = ::recvfrom(fd, buffer, length, flags, nullptr, nullptr);
  if (n > 0 && fd == t_head_socket) {
    t_head_bytes += static_cast<size_t>(n);
    if (t_head_bytes > qs::request_deadline::kMaxHeadBytes) {
      t_head_socket = -1;
      t_replied_status = 431;
      reply_and_linger(fd, kHeadTooLarge, sizeof kHeadTooLarge - 1);
      return 0;
    }
  }
  if (n > 0 && fd == t_body_socket) {
    t_body_bytes += static_cast<size_t>(n);
    const size_t limit = g_max_body_bytes.load(std::memory_order_relaxed);
    if (limit > 0 && t_body_bytes > qs::request_deadline::chunked_wire_limit(limit)) {
      t_body_socket = -1;
      const std::string reply = qs::request_deadline::chunked_body_too_large_reply(limit, t_anthropic);
      t_replied_status = 413;
      reply_and_linger(fd, reply.data(), reply.size());
      return 0;
    }
  }
  return n;
}

namespace qs::request_deadline {
namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { kHead, kBody, kHandling };

struct Connection {
  int dup_fd;
  Phase phase = Phase::kHead;
  Clock::time_point since;
  bool cut = false;
};

// Never destroyed: the watchdog thread runs until the process exits.
struct State {
  std::mutex mutex;
  std::unordered_map<uint64_t, Connection> connections;
  uint64_t next_id = 1;
  Timeouts timeouts;
  bool started = false;
  std::atomic<uint64_t> cut{0};
};

State& state() {
  static State* s = new State;
  return *s;
}

thread_local uint64_t t_connection = 0;

void watchdog() {
  State& s = state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(s.mutex);
    const Clock::time_point now = Clock::now();
    for (auto& [id, c] : s.connections) {
      if (c.cut || c.phase == Phase::kHandling) continue;
      const double limit = c.phase == Phase::kHead ? s.timeouts.head_s : s.timeouts.body_s;
      if (limit <= 0 || std::chrono::duration<double>(now - c.since).count() < limit) continue;
      ::shutdown(c.dup_fd, SHUT_RDWR);
      c.cut = true;
      s.cut.fetch_add(1);
    }
  }
}

thread_local int t_connection_socket = -1;

void set_phase(Phase phase, bool chunked_body = false) {
  if (t_connection == 0) return;
  t_head_socket = phase == Phase::kHead ? t_connection_socket : -1;
  t_head_bytes = 0;
  t_body_socket = phase == Phase::kBody && chunked_body ? t_connection_socket : -1;
  t_body_bytes = 0;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.connections.find(t_connection);
  if (it == s.connections.end()) return;
  it->second.phase = phase;
  it->second.since = Clock::now();
}

}  // namespace

size_t chunked_wire_limit(size_t max_body_bytes) { return max_body_bytes + max_body_bytes / 8 + 4096; }

std::string chunked_body_too_large_reply(size_t max_body_bytes, bool anthropic) {
  const std::string message = "chunked request body larger than " + std::to_string(max_body_bytes) + " bytes (--max-body-bytes)";
  const std::string body =
      anthropic ? "{\"type\":\"error\",\"error\":{\"type\":\"request_too_large\",\"message\":\"" + message + "\"}}"
                : "{\"error\":{\"message\":\"" + message + "\",\"type\":\"invalid_request_error\",\"param\":null,"
                  "\"code\":\"request_too_large\"}}";
  return "HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

void configure(const Timeouts& timeouts, size_t max_body_bytes) {
  g_max_body_bytes.store(max_body_bytes, std::memory_order_relaxed);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.timeouts = timeouts;
  if (!s.started) {
    std::thread(watchdog).detach();
    s.started = true;
  }
}

int current_socket() { return t_served_socket; }

int take_accepted_socket() {
  const int fd = t_accepted_socket;
  t_accepted_socket = -1;
  return fd;
}

void serve_connection(int fd, const std::function<void()>& serve) {
  State& s = state();
  uint64_t id = 0;
  if (fd >= 0) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.started) {
      const int dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (dup_fd >= 0) {
        id = s.next_id++;
        s.connections.emplace(id, Connection{dup_fd, Phase::kHead, Clock::now()});
      }
    }
  }
  t_connection = id;
  t_served_socket = fd;
  t_connection_socket = id != 0 ? fd : -1;
  t_head_socket = t_connection_socket;
  t_head_bytes = 0;
  struct Unregister {
    State& s;
    uint64_t id;
    ~Unregister() {
      t_connection = 0;
      t_served_socket = -1;
      t_connection_socket = -1;
      t_head_socket = -1;
      t_body_socket = -1;
      t_linger_socket = -1;
      t_close_requested = false;
      t_replied_status = 0;
      if (id == 0) return;
      std::lock_guard<std::mutex> lock(s.mutex);
      auto it = s.connections.find(id);
      ::close(it->second.dup_fd);
      s.connections.erase(it);
    }
  } unregister{s, id};
  serve();
}

size_t max_body_bytes() { return g_max_body_bytes.load(std::memory_order_relaxed); }

void head_received(bool body_follows, bool chunked, bool anthropic) {
  t_anthropic = anthropic;
  set_phase(body_follows ? Phase::kBody : Phase::kHandling, body_follows && chunked);
}
void body_received() { set_phase(Phase::kHandling); }
void response_sent() {
  t_replied_status = 0;
  if (t_close_requested) {
    t_close_requested = false;
    if (t_served_socket >= 0) {
      ::shutdown(t_served_socket, SHUT_WR);
      t_linger_socket = t_served_socket;
    }
  }
  set_phase(Phase::kHead);
}
void close_after_response() { t_close_requested = true; }
int replied_status() { return t_replied_status; }

uint64_t connections_cut() { return state().cut.load(); }

}  // namespace qs::request_deadline
