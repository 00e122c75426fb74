// A test-side parser of text/event-stream bodies, written from the WHATWG HTML standard's
// "Interpreting an event stream" algorithm (section 9.2.6), to check what the server sends
// against the rules a browser's EventSource or the OpenAI clients apply.
#pragma once

#include <string>
#include <vector>

namespace qs::test {

struct SseEvent {
  std::string type = "message";  // the "event" field, "message" when absent
  std::string data;              // "data" fields joined with "\n"
  std::string id;                // the last event id at dispatch
};

struct ParsedEventStream {
  std::vector<SseEvent> events;
  int comments = 0;              // lines starting with ':' (ignored by clients)
  bool trailing_partial = false; // the stream ended inside an event (that event is lost)
};

/// Parses `body`: lines end in CRLF, LF or CR; a blank line dispatches the event being built
/// (none when its data buffer is empty); "field: value" with one leading space stripped from the
/// value; a line without a colon is a field with an empty value; unknown fields are ignored.
inline ParsedEventStream parse_event_stream(const std::string& body) {
  ParsedEventStream out;
  std::string type, data, last_id;
  bool pending = false;  // a field line was seen since the last dispatch
  size_t pos = body.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  while (pos < body.size()) {
    const size_t end = body.find_first_of("\r\n", pos);
    if (end == std::string::npos) {  // a line without its end of line: never processed
      out.trailing_partial = true;
      break;
    }
    const std::string line = body.substr(pos, end - pos);
    pos = end + (body[end] == '\r' && end + 1 < body.size() && body[end + 1] == '\n' ? 2 : 1);
    if (line.empty()) {
      if (!data.empty()) {
        data.pop_back();  // the last "\n"
        out.events.push_back({type.empty() ? "message" : type, data, last_id});
      }
      type.clear();
      data.clear();
      pending = false;
      continue;
    }
    if (line[0] == ':') {
      ++out.comments;
      continue;
    }
    const size_t colon = line.find(':');
    const std::string field = line.substr(0, colon);
    std::string value = colon == std::string::npos ? std::string() : line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
    pending = true;
    if (field == "event") {
      type = value;
    } else if (field == "data") {
      data += value + "\n";
    } else if (field == "id" && value.find('\0') == std::string::npos) {
      last_id = value;
    }
  }
  if (pending) out.trailing_partial = true;
  return out;
}

}  // namespace qs::test
