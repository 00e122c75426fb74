#include "loadtest/sse_parser.h"

namespace qs::loadtest {

void SseParser::feed(const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    const char c = data[i];
    if (last_was_cr_) {
      last_was_cr_ = false;
      if (c == '\n') continue;  // the "\n" of a "\r\n" split anywhere
    }
    if (c == '\r' || c == '\n') {
      last_was_cr_ = c == '\r';
      process_line();
      line_.clear();
    } else {
      line_ += c;
    }
  }
}

void SseParser::process_line() {
  if (line_.empty()) {
    dispatch();
    return;
  }
  if (line_[0] == ':') return;  // comment, e.g. ": keep-alive"
  const size_t colon = line_.find(':');
  std::string_view field = line_;
  std::string_view value;
  if (colon != std::string::npos) {
    field = std::string_view(line_).substr(0, colon);
    value = std::string_view(line_).substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.assign(value);
  }
  // "id", "retry" and unknown fields are ignored.
}

void SseParser::dispatch() {
  if (has_data_) {
    SseEvent event{std::move(event_), std::move(data_)};
    handler_(event);
  }
  event_.clear();
  data_.clear();
  has_data_ = false;
}

}  // namespace qs::loadtest
