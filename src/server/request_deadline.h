// Deadlines for receiving a request, which cpp-httplib 0.11 lacks: its read timeout applies to
// each read, so a client that sends its head (or body) one byte every few seconds holds a worker
// thread for as long as it likes (slowloris).
//
// How it works: this file defines accept(2) for the process (cpp-httplib's call binds to it; it
// calls accept4) and remembers the socket on the accepting thread; HttpWorkerPool::enqueue, which
// httplib calls on that thread right after accepting, tags the connection's task with it, and the
// worker serving the connection registers it here (serve_connection). A watchdog thread shuts down
// (shutdown(2), SHUT_RDWR, on a dup of the socket so that the descriptor cannot have been reused)
// a connection whose request head has not arrived `head_s` seconds after the worker started
// waiting for it (the connection was picked up, or the previous response was sent), or whose body
// has not arrived `body_s` seconds after its head. httplib's pending read then fails and it closes
// the connection.
//
// The same accounting caps the size of a request head (kMaxHeadBytes): this file also defines
// recv(2), which counts the bytes read while a head is expected. It also caps a chunked body
// (Transfer-Encoding: chunked), which cpp-httplib 0.11 reads without any limit: past
// chunked_wire_limit(max_body_bytes) bytes on the wire the client gets 413 request_too_large and
// the connection ends with a lingering close. (A body with a Content-Length above the limit is refused from its
// head, server/routes/pre_routing.h.)
//
// The HTTP server reports the phases from its handlers, always on the thread serving the
// connection: head_received() in the pre-routing handler, body_received() once the body has been
// read (body parser, error handler), response_sent() in the logger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace qs::request_deadline {

/// Bytes a request head may have (request line + headers, nginx's default is 4 x 8 KiB): a larger
/// one gets 431 request_header_too_large and the connection is closed.
inline constexpr size_t kMaxHeadBytes = 64 * 1024;

struct Timeouts {
  double head_s = 10;  // whole request head (request line + headers); 0: no deadline
  double body_s = 30;  // whole body, from the end of the head; 0: no deadline
};

/// Sets the deadlines and the chunked-body cap (`max_body_bytes`, 0: none) and starts the watchdog
/// (once per process; later calls change them). Without a call, serve_connection only runs its task.
void configure(const Timeouts& timeouts, size_t max_body_bytes = 0);

/// Bytes a chunked body of at most `max_body_bytes` may take on the wire: the payload plus an
/// allowance for the chunk framing (size lines and CRLFs: 1/8 of the limit + 4 KiB, i.e. chunks
/// of ~64 bytes or more; a client sending smaller chunks gets 413 earlier) and for bytes of a
/// pipelined next request read with the body's end.
size_t chunked_wire_limit(size_t max_body_bytes);
/// The complete HTTP 413 response (Connection: close) sent for a chunked body over the cap: JSON in
/// Anthropic's error shape when `anthropic` (a /v1/messages request), else OpenAI's.
std::string chunked_body_too_large_reply(size_t max_body_bytes, bool anthropic = false);
/// The --max-body-bytes given to configure() (0: none): the cap on a decoded chunked body too.
size_t max_body_bytes();

/// The socket accept() returned last on this thread, or -1; resets it to -1.
int take_accepted_socket();

/// The socket of the connection the calling thread serves (inside serve_connection), or -1: what a
/// route handler probes to see its client leave.
int current_socket();

/// Runs `serve` (httplib serving one connection) with the connection `fd` registered, its head
/// deadline starting now. fd < 0: runs `serve` untracked.
void serve_connection(int fd, const std::function<void()>& serve);

/// Phase changes of the connection served by the calling thread (no-ops on other threads).
/// `chunked`: the body is sent with Transfer-Encoding: chunked (counted against the cap);
/// `anthropic`: a /v1/messages request (the shape of the cap's 413).
void head_received(bool body_follows, bool chunked = false, bool anthropic = false);
void body_received();
void response_sent();
/// Ends the connection served by the calling thread once the response in progress is sent: the
/// response goes out, the write side is shut (FIN), then what the client still sends (an unread
/// body) is read and discarded for up to kLingerSeconds or kLingerBytes, and the next read reports
/// EOF, so httplib closes the connection instead of parsing the body as a next request (RFC 9112
/// section 9.6; the lingering read keeps the kernel from answering unread data with a reset that
/// could destroy the response before the client reads it).
void close_after_response();
inline constexpr double kLingerSeconds = 1.0;
inline constexpr size_t kLingerBytes = 16u << 20;

/// The status of the reply already written to the calling thread's connection for the request
/// being read (431: head above kMaxHeadBytes, 413: chunked body past its wire limit), after which
/// the read reported EOF and httplib answers the half-read request with a 400 nobody receives;
/// 0 when none. Reset once a response is sent.
int replied_status();

/// Connections cut by a deadline since the process started.
uint64_t connections_cut();

}  // namespace qs::request_deadline
