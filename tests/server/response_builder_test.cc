// Non-streamed response bodies against the OpenAI API reference: a chat.completion object
// (id, object, created, model, choices[].{index, message{role, content, tool_calls}, logprobs,
// finish_reason}, usage{prompt_tokens, completion_tokens, total_tokens}), a text_completion object
// (choices[].{text, index, logprobs{tokens, token_logprobs, top_logprobs, text_offset},
// finish_reason}); tool call arguments are a JSON string; logprob "bytes" are the token's UTF-8
// bytes. Token ids are the Hugging Face tokenizer's for "Hello, world" (README example).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "server/response_builder.h"
#include "support/tokenizer_test_support.h"

namespace qs {
namespace {

using json = nlohmann::json;

const std::set<std::string> kFinishReasons = {"stop", "length", "tool_calls", "content_filter", "function_call"};

GenerationJob job_of(GenerationJob::Api api) {
  GenerationJob job;
  job.api = api;
  job.id = api == GenerationJob::Api::kChat ? "chatcmpl-abc" : "cmpl-abc";
  job.model = "served";
  job.created = 1700000000;
  job.prompt_ids = {1, 2, 3, 4};
  return job;
}

ChoiceState finished_choice(std::string text, int64_t completion_tokens, std::string finish_reason) {
  ChoiceState c;
  c.text = std::move(text);
  c.completion_tokens = completion_tokens;
  c.finish_reason = std::move(finish_reason);
  c.done = true;
  return c;
}

void expect_usage(const json& usage, int64_t prompt, int64_t completion) {
  ASSERT_TRUE(usage.is_object()) << usage;
  EXPECT_EQ(usage["prompt_tokens"], prompt);
  EXPECT_EQ(usage["completion_tokens"], completion);
  EXPECT_EQ(usage["total_tokens"], prompt + completion) << "total = prompt + completion";
  EXPECT_TRUE(usage["prompt_tokens_details"]["cached_tokens"].is_number_integer()) << usage;
}

void expect_envelope(const json& body, const GenerationJob& job, const char* object) {
  EXPECT_EQ(body["id"], job.id);
  EXPECT_EQ(body["object"], object);
  EXPECT_TRUE(body["created"].is_number_integer());
  EXPECT_EQ(body["created"], job.created);
  EXPECT_EQ(body["model"], job.model);
  ASSERT_TRUE(body["choices"].is_array());
}

TEST(ResponseBuilder, ChatCompletionObject) {
  const GenerationJob job = job_of(GenerationJob::Api::kChat);
  const std::vector<ChoiceState> choices{finished_choice("Hello there.", 3, "stop"), finished_choice("Hi", 5, "length")};
  const json body = build_response(job, choices, test::qwen_tokenizer());
  expect_envelope(body, job, "chat.completion");
  ASSERT_EQ(body["choices"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& choice = body["choices"][i];
    EXPECT_EQ(choice["index"], i);
    EXPECT_EQ(choice["message"]["role"], "assistant");
    EXPECT_EQ(choice["message"]["content"], choices[i].text);
    EXPECT_TRUE(choice["logprobs"].is_null()) << "not requested";
    EXPECT_EQ(choice["finish_reason"], choices[i].finish_reason);
    EXPECT_TRUE(kFinishReasons.count(choice["finish_reason"].get<std::string>())) << choice;
  }
  expect_usage(body["usage"], 4, 8);  // completion tokens summed over choices
}

TEST(ResponseBuilder, ToolCallsHaveAFunctionTypeAnIdAndJsonStringArguments) {
  GenerationJob job = job_of(GenerationJob::Api::kChat);
  job.parse_tool_calls = true;
  const std::vector<ChoiceState> choices{finished_choice(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>", 20,
      "stop")};
  const json body = build_response(job, choices, test::qwen_tokenizer());
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& message = choice["message"];
  EXPECT_TRUE(message["content"].is_null()) << message;
  ASSERT_TRUE(message["tool_calls"].is_array()) << message;
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  const json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  ASSERT_TRUE(call["id"].is_string());
  EXPECT_FALSE(call["id"].get<std::string>().empty());
  EXPECT_EQ(call["function"]["name"], "get_weather");
  ASSERT_TRUE(call["function"]["arguments"].is_string()) << "OpenAI: arguments is JSON text";
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), (json{{"city", "Paris"}, {"days", 2}}));
}

// A forced tool call cut by max_tokens after one complete call: the calls made are returned, and
// finish_reason says the output was truncated ("length", OpenAI's rule for a max_tokens cut; the
// README's "length if max_tokens cuts it"), not "tool_calls" as if the model had finished.
TEST(ResponseBuilder, ToolCallsCutByMaxTokensFinishWithLength) {
  GenerationJob job = job_of(GenerationJob::Api::kChat);
  job.parse_tool_calls = true;
  const std::vector<ChoiceState> choices{finished_choice(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_w",
      60, "length")};
  const json body = build_response(job, choices, test::qwen_tokenizer());
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice;
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST(ResponseBuilder, TextWithoutToolCallsIsPlainContent) {
  GenerationJob job = job_of(GenerationJob::Api::kChat);
  job.parse_tool_calls = true;
  const json body = build_response(job, {finished_choice("No tools needed.", 4, "stop")}, test::qwen_tokenizer());
  EXPECT_EQ(body["choices"][0]["message"]["content"], "No tools needed.");
  EXPECT_FALSE(body["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST(ResponseBuilder, ReasoningIsSplitOffTheContent) {
  GenerationJob job = job_of(GenerationJob::Api::kChat);
  job.split_reasoning = true;
  const json body = build_response(job, {finished_choice("<think>\nsum it\n</think>\n\n4", 9, "stop")}, test::qwen_tokenizer());
  const json& message = body["choices"][0]["message"];
  EXPECT_EQ(message["content"], "4");
  ASSERT_TRUE(message["reasoning_content"].is_string()) << message;
  EXPECT_NE(message["reasoning_content"].get<std::string>().find("sum it"), std::string::npos);
  EXPECT_EQ(message["reasoning_content"].get<std::string>().find("<think>"), std::string::npos);
}

// "Hello, world" = Hello | , | ␠world in the Qwen tokenizer (Hugging Face ids).
const std::vector<int32_t> kHelloWorldIds = {9707, 11, 1879};
const std::vector<std::string> kHelloWorldTokens = {"Hello", ",", " world"};

std::vector<TokenLogprob> hello_world_logprobs() {
  return {{9707, -0.5f, {{9707, -0.5f}, {11, -2.0f}}}, {11, -0.25f, {{11, -0.25f}}}, {1879, -1.0f, {{1879, -1.0f}}}};
}

TEST(ResponseBuilder, ChatLogprobsListTokensWithUtf8Bytes) {
  ASSERT_EQ(test::qwen_tokenizer().decode(kHelloWorldIds), "Hello, world") << "fixture ids";
  GenerationJob job = job_of(GenerationJob::Api::kChat);
  job.logprobs = true;
  ChoiceState c = finished_choice("Hello, world", 3, "stop");
  c.logprobs = hello_world_logprobs();
  const json body = build_response(job, {c}, test::qwen_tokenizer());
  const json& content = body["choices"][0]["logprobs"]["content"];
  ASSERT_TRUE(content.is_array()) << body;
  ASSERT_EQ(content.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const json& entry = content[i];
    EXPECT_EQ(entry["token"], kHelloWorldTokens[i]);
    EXPECT_TRUE(entry["logprob"].is_number());
    EXPECT_LE(entry["logprob"].get<double>(), 0.0) << "a log probability";
    std::vector<int> utf8;
    for (unsigned char b : kHelloWorldTokens[i]) utf8.push_back(b);
    EXPECT_EQ(entry["bytes"], json(utf8));
    ASSERT_TRUE(entry["top_logprobs"].is_array());
    for (const json& alt : entry["top_logprobs"]) {
      EXPECT_TRUE(alt["token"].is_string() && alt["logprob"].is_number() && alt["bytes"].is_array()) << alt;
    }
  }
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], ",");
}

TEST(ResponseBuilder, TextCompletionObjectWithEchoAndLogprobs) {
  GenerationJob job = job_of(GenerationJob::Api::kCompletion);
  job.echo = true;
  job.prompt_text = "Say: ";
  job.logprobs = true;
  ChoiceState c = finished_choice("Hello, world", 3, "length");
  c.logprobs = hello_world_logprobs();
  const json body = build_response(job, {c}, test::qwen_tokenizer());
  expect_envelope(body, job, "text_completion");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["text"], "Say: Hello, world") << "echo prepends the prompt";
  EXPECT_EQ(choice["finish_reason"], "length");
  const json& lp = choice["logprobs"];
  EXPECT_EQ(lp["tokens"], json(kHelloWorldTokens));
  ASSERT_EQ(lp["token_logprobs"].size(), 3u);
  ASSERT_EQ(lp["top_logprobs"].size(), 3u);
  EXPECT_TRUE(lp["top_logprobs"][0].is_object()) << "token -> logprob";
  EXPECT_TRUE(lp["top_logprobs"][0].contains(","));
  // text_offset: where each token starts in choices[].text (ASCII here: bytes = characters).
  const std::string text = choice["text"];
  ASSERT_EQ(lp["text_offset"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const size_t offset = lp["text_offset"][i];
    EXPECT_EQ(text.substr(offset, kHelloWorldTokens[i].size()), kHelloWorldTokens[i]) << i;
  }
  expect_usage(body["usage"], 4, 3);
}

TEST(ResponseBuilder, TextOffsetCountsCharactersNotBytes) {
  GenerationJob job = job_of(GenerationJob::Api::kCompletion);
  job.echo = true;
  job.prompt_text = "S\xC3\xA4g \xE2\x86\x92 ";  // "Säg → ": 6 characters (Python len), 9 bytes
  job.logprobs = true;
  ChoiceState c = finished_choice("Hello, world", 3, "length");
  c.logprobs = hello_world_logprobs();
  const json lp = build_response(job, {c}, test::qwen_tokenizer())["choices"][0]["logprobs"];
  EXPECT_EQ(lp["text_offset"], json({6, 11, 12})) << lp;
}

TEST(ResponseBuilder, StreamedTextOffsetsContinueAcrossChunks) {
  GenerationJob job = job_of(GenerationJob::Api::kCompletion);
  job.logprobs = true;
  job.stream = true;
  StreamEncoder encoder(job, test::qwen_tokenizer(), 1);
  ChoiceState state;
  std::vector<size_t> offsets;
  const std::vector<TokenLogprob> all = hello_world_logprobs();
  for (size_t i = 0; i < all.size(); ++i) {
    EngineEvent event;
    event.kind = EngineEvent::Kind::kDelta;
    event.text = kHelloWorldTokens[i];
    event.logprobs = {all[i]};
    const std::string sse = encoder.event_chunks(0, event, state);
    ASSERT_EQ(sse.rfind("data: ", 0), 0u) << sse;
    const json chunk = json::parse(sse.substr(6));
    for (const json& o : chunk["choices"][0]["logprobs"]["text_offset"]) offsets.push_back(o);
  }
  // "Hello" starts at 0, "," at 5, " world" at 6 of the streamed text "Hello, world".
  EXPECT_EQ(offsets, (std::vector<size_t>{0, 5, 6}));
}

TEST(ResponseBuilder, TextCompletionWithoutLogprobsHasNull) {
  const json body = build_response(job_of(GenerationJob::Api::kCompletion), {finished_choice("x", 1, "stop")},
                                   test::qwen_tokenizer());
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["choices"][0]["text"], "x");
}

}  // namespace
}  // namespace qs
