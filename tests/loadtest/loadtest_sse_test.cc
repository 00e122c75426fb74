// SSE framing (src/loadtest/sse_parser.h) and chunk accounting (apply_chunk in sse_client.h).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "loadtest/sse_client.h"
#include "loadtest/sse_parser.h"

namespace qs::loadtest {
namespace {

// A stream mixing LF, CRLF and CR line ends, comments, a multi-line event, an event name, id and
// retry fields, an empty-data event, and the OpenAI [DONE] sentinel.
const std::string kStream =
    ": keep-alive\n\n"
    "data: {\"a\":1}\n\n"
    "data:{\"b\":2}\r\n\r\n"
    ": keep-alive\r\n"
    "event: update\nid: 7\nretry: 100\ndata: line1\ndata:  line2\n\n"
    "data: cr\r\r"
    "data\n\n"
    "unknown: x\n\n"
    "data: [DONE]\n\n";

const std::vector<SseEvent> kExpected = {
    {"", "{\"a\":1}"}, {"", "{\"b\":2}"}, {"update", "line1\n line2"}, {"", "cr"}, {"", ""},
    {"", "[DONE]"},
};

std::vector<SseEvent> parse_pieces(const std::vector<std::string>& pieces) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); });
  for (const auto& p : pieces) parser.feed(p);
  EXPECT_EQ(parser.pending_bytes(), 0u);
  return events;
}

void expect_events(const std::vector<SseEvent>& got, const std::string& where) {
  ASSERT_EQ(got.size(), kExpected.size()) << where;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].event, kExpected[i].event) << where << " event " << i;
    EXPECT_EQ(got[i].data, kExpected[i].data) << where << " event " << i;
  }
}

TEST(LoadtestSse, WholeStream) { expect_events(parse_pieces({kStream}), "whole"); }

TEST(LoadtestSse, SplitAtEveryPairOfOffsets) {
  for (size_t i = 0; i <= kStream.size(); ++i) {
    for (size_t j = i; j <= kStream.size(); ++j) {
      expect_events(parse_pieces({kStream.substr(0, i), kStream.substr(i, j - i), kStream.substr(j)}),
                    "split at " + std::to_string(i) + "," + std::to_string(j));
    }
  }
}

TEST(LoadtestSse, OneByteAtATime) {
  std::vector<std::string> bytes;
  for (char c : kStream) bytes.emplace_back(1, c);
  expect_events(parse_pieces(bytes), "bytewise");
}

TEST(LoadtestSse, DoneSentinelAndCommentsOnly) {
  const auto events = parse_pieces({": ping\n\n: ping\n\ndata: [DONE]\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].is_done());
}

TEST(LoadtestSse, UnterminatedEventIsNotDispatched) {
  std::vector<SseEvent> events;
  SseParser parser([&](const SseEvent& e) { events.push_back(e); });
  parser.feed("data: {\"x\":1}\n");
  EXPECT_TRUE(events.empty());
  EXPECT_GT(parser.pending_bytes(), 0u);
}

TEST(LoadtestSse, ChatChunksGiveTtftItlAndUsage) {
  const Clock::time_point sent{};
  std::optional<Clock::time_point> last;
  RequestRecord r;
  r.ttft_ms = std::nan("");
  auto at = [&](int ms) { return sent + std::chrono::milliseconds(ms); };
  using nlohmann::json;
  EXPECT_TRUE(apply_chunk(json::parse(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})"),
                          true, sent, at(5), last, r));
  EXPECT_TRUE(std::isnan(r.ttft_ms));  // an empty role chunk is not a token
  EXPECT_TRUE(apply_chunk(json::parse(R"({"choices":[{"delta":{"content":"Hi"}}]})"), true, sent,
                          at(20), last, r));
  EXPECT_TRUE(apply_chunk(json::parse(R"({"choices":[{"delta":{"content":" there"}}]})"), true,
                          sent, at(50), last, r));
  EXPECT_TRUE(apply_chunk(
      json::parse(R"({"choices":[{"delta":{"content":"!"},"finish_reason":"length"}]})"), true, sent,
      at(60), last, r));
  EXPECT_TRUE(apply_chunk(
      json::parse(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}})"), true,
      sent, at(61), last, r));
  EXPECT_DOUBLE_EQ(r.ttft_ms, 20.0);
  ASSERT_EQ(r.itl_ms.size(), 2u);
  EXPECT_DOUBLE_EQ(r.itl_ms[0], 30.0);
  EXPECT_DOUBLE_EQ(r.itl_ms[1], 10.0);
  EXPECT_EQ(r.content_chunks, 3);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.prompt_tokens, 9);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.text, "Hi there!");
}

TEST(LoadtestSse, CompletionChunksAndErrorPayload) {
  const Clock::time_point sent{};
  std::optional<Clock::time_point> last;
  RequestRecord r;
  using nlohmann::json;
  EXPECT_TRUE(apply_chunk(json::parse(R"({"choices":[{"text":"abc"}]})"), false, sent,
                          sent + std::chrono::milliseconds(7), last, r));
  EXPECT_DOUBLE_EQ(r.ttft_ms, 7.0);
  EXPECT_FALSE(apply_chunk(json::parse(R"({"error":{"message":"timeout","code":504}})"), false,
                           sent, sent, last, r));
  EXPECT_EQ(r.error, "timeout");
}

}  // namespace
}  // namespace qs::loadtest
