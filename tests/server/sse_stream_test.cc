// Streamed responses, read back with a WHATWG event-stream parser (support/event_stream.h) the
// way a client reads them: every event complete and of type "message", JSON data in one event,
// "data: [DONE]" last (OpenAI), chat.completion.chunk / text_completion chunks with one id, the
// assistant role in each choice's first delta, the deltas adding up to the generated text, exactly
// one finish_reason per choice (an OpenAI value) and nothing after it, "usage": null on every
// chunk and one usage chunk with empty choices when stream_options.include_usage is set, an
// error after the start as an OpenAI-shaped error event, keep-alives as comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "metrics/server_metrics.h"
#include "server/generation_job.h"
#include "server/response_builder.h"
#include "support/event_stream.h"
#include "support/tokenizer_test_support.h"

namespace qs {
namespace {

using json = nlohmann::json;

const std::set<std::string> kFinishReasons = {"stop", "length", "tool_calls", "content_filter", "function_call"};

GenerationJob stream_job(GenerationJob::Api api, bool include_usage) {
  GenerationJob job;
  job.api = api;
  job.id = api == GenerationJob::Api::kChat ? "chatcmpl-s1" : "cmpl-s1";
  job.model = "served";
  job.created = 1700000000;
  job.prompt_ids = {1, 2, 3};
  job.stream = true;
  job.include_usage = include_usage;
  job.arrival = SteadyClock::now();
  job.log_format = GenerationJob::LogFormat::kNone;
  return job;
}

EngineEvent delta(std::string text, int64_t completion_tokens) {
  EngineEvent e;
  e.text = std::move(text);
  e.token_ids = {42};
  e.completion_tokens = completion_tokens;
  e.queue_ms = completion_tokens == 1 ? 0.5 : -1;
  return e;
}

EngineEvent finished(std::string finish_reason, int64_t completion_tokens) {
  EngineEvent e;
  e.kind = EngineEvent::Kind::kFinished;
  e.finish_reason = std::move(finish_reason);
  e.completion_tokens = completion_tokens;
  return e;
}

// Runs stream_generation over choices fed with `events[i]` (pushed `delay` after the first write,
// so that a slow start cannot eat the delay) and returns everything written.
std::string stream(GenerationJob job, const std::vector<std::vector<EngineEvent>>& events,
                   std::chrono::milliseconds delay = std::chrono::milliseconds(0), int64_t keepalive_ms = 5000) {
  std::vector<ChoiceState> choices(events.size());
  for (auto& c : choices) c.stream = std::make_shared<RequestStream>();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& c : choices) streams.push_back(c.stream);
  const Tokenizer& tokenizer = test::qwen_tokenizer();
  std::atomic<bool> started{false};
  std::thread producer([&] {
    while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(delay);
    for (size_t i = 0; i < events.size(); ++i) {
      for (const EngineEvent& e : events[i]) streams[i]->push(e);
    }
  });
  metrics::ServerMetrics metrics;
  std::string written;
  stream_generation(std::move(job), std::move(choices), tokenizer, metrics,
                    [&written, &started](const std::string& bytes) {
                      written += bytes;
                      started.store(true);
                      return true;
                    },
                    keepalive_ms);
  producer.join();
  return written;
}

struct ParsedChunks {
  std::vector<json> chunks;  // every event before [DONE]
  bool done_last = false;
  int comments = 0;
};

ParsedChunks parse_openai_stream(const std::string& body) {
  const test::ParsedEventStream parsed = test::parse_event_stream(body);
  EXPECT_FALSE(parsed.trailing_partial) << "the stream ends inside an event";
  ParsedChunks out;
  out.comments = parsed.comments;
  for (size_t i = 0; i < parsed.events.size(); ++i) {
    const test::SseEvent& event = parsed.events[i];
    EXPECT_EQ(event.type, "message");
    if (event.data == "[DONE]") {
      EXPECT_EQ(i + 1, parsed.events.size()) << "[DONE] is the last event";
      out.done_last = i + 1 == parsed.events.size();
      continue;
    }
    EXPECT_EQ(event.data.find('\n'), std::string::npos) << "one JSON document per data line";
    out.chunks.push_back(json::parse(event.data));
  }
  return out;
}

// Chat chunks per choice index: the role first, deltas joined, one finish_reason, nothing after.
void expect_chat_choices(const std::vector<json>& chunks, const std::vector<std::string>& texts,
                         const std::vector<std::string>& finish_reasons) {
  std::map<size_t, std::string> content;
  std::map<size_t, int> role_seen, finish_seen;
  for (const json& chunk : chunks) {
    if (chunk["choices"].empty()) continue;  // the usage chunk
    ASSERT_EQ(chunk["choices"].size(), 1u) << chunk;
    const json& choice = chunk["choices"][0];
    const size_t index = choice["index"];
    ASSERT_LT(index, texts.size());
    EXPECT_EQ(finish_seen[index], 0) << "a chunk after the finish_reason of choice " << index << ": " << chunk;
    const json& d = choice["delta"];
    ASSERT_TRUE(d.is_object()) << chunk;
    if (d.contains("role")) {
      EXPECT_EQ(d["role"], "assistant");
      EXPECT_EQ(content[index], "") << "the role comes first";
      ++role_seen[index];
    } else {
      EXPECT_EQ(role_seen[index], 1) << "a delta before the role: " << chunk;
    }
    if (d.contains("content") && !d["content"].is_null()) content[index] += d["content"].get<std::string>();
    ASSERT_TRUE(choice.contains("finish_reason")) << chunk;
    if (!choice["finish_reason"].is_null()) {
      const std::string reason = choice["finish_reason"];
      EXPECT_TRUE(kFinishReasons.count(reason)) << reason;
      EXPECT_EQ(reason, finish_reasons[index]);
      ++finish_seen[index];
    }
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(role_seen[i], 1) << "choice " << i;
    EXPECT_EQ(finish_seen[i], 1) << "choice " << i;
    EXPECT_EQ(content[i], texts[i]) << "choice " << i;
  }
}

TEST(SseStream, ChatChunksFollowTheProtocol) {
  const GenerationJob job = stream_job(GenerationJob::Api::kChat, false);
  const std::string body = stream(job, {{delta("Hel", 1), delta("lo ", 2), delta("\"wörld\"\n", 3), finished("stop", 3)},
                                        {delta("Hi", 1), finished("length", 1)}});
  const ParsedChunks parsed = parse_openai_stream(body);
  EXPECT_TRUE(parsed.done_last);
  ASSERT_FALSE(parsed.chunks.empty());
  for (const json& chunk : parsed.chunks) {
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["id"], job.id) << "every chunk has the same id";
    EXPECT_EQ(chunk["created"], job.created);
    EXPECT_EQ(chunk["model"], job.model);
    EXPECT_FALSE(chunk.contains("usage")) << "usage only with stream_options.include_usage";
  }
  expect_chat_choices(parsed.chunks, {"Hello \"wörld\"\n", "Hi"}, {"stop", "length"});
}

// OpenAI's chat.completion.chunk carries at most one tool_calls entry per call index (the first
// with id, type and name); the argument fragments of all chunks concatenate to the call's JSON.
// A whole call arriving in one engine event must not become two entries with the same index.
TEST(SseStream, AToolCallInOneEventIsOneEntryPerIndexInItsChunk) {
  GenerationJob job = stream_job(GenerationJob::Api::kChat, false);
  job.parse_tool_calls = true;
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const std::string body = stream(job, {{delta(call, 1), finished("stop", 1)}});
  const ParsedChunks parsed = parse_openai_stream(body);
  std::string arguments, name;
  int entries_with_id = 0;
  for (const json& chunk : parsed.chunks) {
    if (chunk["choices"].empty() || !chunk["choices"][0]["delta"].contains("tool_calls")) continue;
    std::set<int> indices;
    for (const json& entry : chunk["choices"][0]["delta"]["tool_calls"]) {
      EXPECT_TRUE(indices.insert(entry["index"].get<int>()).second) << "two entries with one index: " << chunk;
      if (entry.contains("id")) {
        ++entries_with_id;
        name = entry["function"]["name"];
      }
      arguments += entry["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(entries_with_id, 1);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(arguments), json::parse(R"({"city": "Paris"})"));
}

// Streamed, the same rule as the whole response: a complete call followed by a max_tokens cut
// finishes with "length"; a call that ends the generation, with "tool_calls".
TEST(SseStream, ToolCallsCutByMaxTokensFinishWithLength) {
  GenerationJob job = stream_job(GenerationJob::Api::kChat, false);
  job.parse_tool_calls = true;
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  for (const std::string reason : {"length", "stop"}) {
    const std::string body = stream(job, {{delta(call + "\n<tool_call>\n{\"na", 1), finished(reason, 1)}});
    const ParsedChunks parsed = parse_openai_stream(body);
    std::string finish;
    for (const json& chunk : parsed.chunks) {
      if (!chunk["choices"].empty() && chunk["choices"][0]["finish_reason"].is_string()) finish = chunk["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, reason == "length" ? "length" : "tool_calls") << body;
  }
}

TEST(SseStream, IncludeUsageAddsNullUsageToEveryChunkAndOneUsageChunkBeforeDone) {
  const std::string body =
      stream(stream_job(GenerationJob::Api::kChat, true), {{delta("a", 1), delta("b", 2), finished("stop", 2)}});
  const ParsedChunks parsed = parse_openai_stream(body);
  EXPECT_TRUE(parsed.done_last);
  ASSERT_GE(parsed.chunks.size(), 2u);
  const json& last = parsed.chunks.back();
  EXPECT_TRUE(last["choices"].is_array() && last["choices"].empty()) << "the usage chunk has empty choices";
  EXPECT_EQ(last["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(last["usage"]["completion_tokens"], 2);
  EXPECT_EQ(last["usage"]["total_tokens"], 5);
  for (size_t i = 0; i + 1 < parsed.chunks.size(); ++i) {
    ASSERT_TRUE(parsed.chunks[i].contains("usage")) << parsed.chunks[i];
    EXPECT_TRUE(parsed.chunks[i]["usage"].is_null()) << parsed.chunks[i];
  }
  expect_chat_choices(parsed.chunks, {"ab"}, {"stop"});
}

TEST(SseStream, CompletionChunksAreTextCompletionObjects) {
  const GenerationJob job = stream_job(GenerationJob::Api::kCompletion, false);
  const std::string body = stream(job, {{delta("Once", 1), delta(" upon", 2), finished("length", 2)}});
  const ParsedChunks parsed = parse_openai_stream(body);
  EXPECT_TRUE(parsed.done_last);
  std::string text;
  int finishes = 0;
  for (const json& chunk : parsed.chunks) {
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["id"], job.id);
    ASSERT_EQ(chunk["choices"].size(), 1u);
    const json& choice = chunk["choices"][0];
    EXPECT_EQ(choice["index"], 0);
    EXPECT_EQ(finishes, 0) << "nothing after the finish";
    text += choice["text"].get<std::string>();
    if (!choice["finish_reason"].is_null()) {
      EXPECT_EQ(choice["finish_reason"], "length");
      ++finishes;
    }
  }
  EXPECT_EQ(text, "Once upon");
  EXPECT_EQ(finishes, 1);
}

TEST(SseStream, AFailureAfterTheStartIsAnOpenAiErrorEvent) {
  EngineEvent timeout;
  timeout.kind = EngineEvent::Kind::kError;
  timeout.error = "request timed out after 1 s";
  timeout.error_code = EngineErrorCode::kTimeout;
  const std::string body = stream(stream_job(GenerationJob::Api::kChat, false), {{delta("a", 1), timeout}});
  const ParsedChunks parsed = parse_openai_stream(body);
  const auto error = std::find_if(parsed.chunks.begin(), parsed.chunks.end(), [](const json& c) { return c.contains("error"); });
  ASSERT_NE(error, parsed.chunks.end()) << body;
  const json& e = (*error)["error"];
  EXPECT_EQ(e.size(), 4u) << e;
  EXPECT_EQ(e["message"], "request timed out after 1 s");
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << e;
}

TEST(SseStream, KeepAlivesAreCommentsThatClientsIgnore) {
  // Nothing arrives for 600 ms after the first chunk, with a 50 ms keep-alive interval: the
  // stream's 200 ms waits for an event time out and comments are written meanwhile.
  const std::string body = stream(stream_job(GenerationJob::Api::kChat, false), {{delta("late", 1), finished("stop", 1)}},
                                  std::chrono::milliseconds(600), 50);
  const ParsedChunks parsed = parse_openai_stream(body);
  EXPECT_GE(parsed.comments, 1) << body;
  EXPECT_TRUE(parsed.done_last);
  expect_chat_choices(parsed.chunks, {"late"}, {"stop"});
}

TEST(SseStream, SseDataIsOneDataLineAndABlankLine) {
  const std::string bytes = sse_data(json{{"text", "line one\nline two\r\n"}});
  const test::ParsedEventStream parsed = test::parse_event_stream(bytes);
  ASSERT_EQ(parsed.events.size(), 1u);
  EXPECT_FALSE(parsed.trailing_partial);
  EXPECT_EQ(json::parse(parsed.events[0].data)["text"], "line one\nline two\r\n") << "newlines stay escaped in JSON";
  EXPECT_EQ(bytes.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(bytes.begin(), bytes.end(), '\n'), 2) << "data line + blank line";
}

}  // namespace
}  // namespace qs
