// Incremental parser of a Server-Sent Events stream (WHATWG HTML "Server-sent events", section
// "Parsing an event stream"), fed with whatever byte chunks the network delivers.
//
// Lines end in "\n", "\r\n" or "\r" (a "\r" at the end of one chunk followed by "\n" at the start of
// the next is one line end). A line starting with ':' is a comment (e.g. ": keep-alive") and is
// ignored. "data:" lines are joined with '\n'; one leading space after the colon is dropped. A blank
// line dispatches the event if it has any data. "event:" sets the event name; "id:" and "retry:"
// are accepted and ignored. The OpenAI end-of-stream sentinel is an ordinary event whose data is
// "[DONE]" (see SseEvent::is_done).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace qs::loadtest {

struct SseEvent {
  std::string event;  // "event:" field; empty means the default "message"
  std::string data;   // "data:" lines joined with '\n'

  bool is_done() const { return data == "[DONE]"; }
};

class SseParser {
 public:
  using Handler = std::function<void(const SseEvent&)>;

  explicit SseParser(Handler handler) : handler_(std::move(handler)) {}

  // Consumes `size` bytes; calls the handler once per complete event, in order.
  void feed(const char* data, size_t size);
  void feed(std::string_view chunk) { feed(chunk.data(), chunk.size()); }

  // Bytes of an unfinished line or event still held (0 after a clean end of stream).
  size_t pending_bytes() const { return line_.size() + data_.size(); }

 private:
  void process_line();
  void dispatch();

  Handler handler_;
  std::string line_;       // current line without its terminator
  std::string event_;      // event name of the event being built
  std::string data_;       // data of the event being built
  bool has_data_ = false;  // at least one data: line seen since the last dispatch
  bool last_was_cr_ = false;  // previous byte was '\r' (a following '\n' is part of that line end)
};

}  // namespace qs::loadtest
