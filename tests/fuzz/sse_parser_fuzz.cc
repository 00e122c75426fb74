// The loadtest SSE parser (loadtest/sse_parser.h) on arbitrary byte streams split into arbitrary
// chunks.
// Invariants: the events do not depend on how the stream is chunked (whole, one byte at a time,
// fuzzed chunk sizes give the same events); no event's data or name holds a line terminator other
// than the '\n' joining data lines; after the stream the parser holds only the last unfinished
// line/event (pending_bytes() <= the bytes fed).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "loadtest/sse_parser.h"

namespace {

using qs::fuzz::check;
using Events = std::vector<std::pair<std::string, std::string>>;

Events parse(const std::string& stream, const std::vector<size_t>& chunks, size_t* pending) {
  Events events;
  qs::loadtest::SseParser parser([&](const qs::loadtest::SseEvent& e) {
    check(e.event.find_first_of("\r\n") == std::string::npos, "event name holds a line terminator");
    check(e.data.find('\r') == std::string::npos, "event data holds a carriage return");
    events.emplace_back(e.event, e.data);
  });
  size_t at = 0;
  for (size_t n : chunks) {
    if (at >= stream.size()) break;
    n = std::min(n, stream.size() - at);
    parser.feed(stream.data() + at, n);
    at += n;
  }
  if (at < stream.size()) parser.feed(stream.data() + at, stream.size() - at);
  *pending = parser.pending_bytes();
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::vector<size_t> chunks;
  const size_t n_chunks = in.ConsumeIntegralInRange<size_t>(0, 16);
  for (size_t i = 0; i < n_chunks; ++i) chunks.push_back(in.ConsumeIntegralInRange<size_t>(0, 64));
  const std::string stream = in.ConsumeRemainingBytesAsString();
  size_t pending_whole = 0, pending_bytes = 0, pending_chunks = 0;
  const Events whole = parse(stream, {stream.size()}, &pending_whole);
  const Events bytewise = parse(stream, std::vector<size_t>(stream.size(), 1), &pending_bytes);
  const Events chunked = parse(stream, chunks, &pending_chunks);
  check(whole == bytewise, "events differ when fed one byte at a time");
  check(whole == chunked, "events differ with fuzzed chunk sizes");
  check(pending_whole == pending_bytes && pending_whole == pending_chunks, "pending bytes depend on chunking");
  check(pending_whole <= stream.size(), "parser holds more bytes than it was fed");
  return 0;
}
