// /v1/messages translation (anthropic_api.h) against Anthropic's API reference ("Messages",
// "Streaming Messages", "Errors"): request fields map onto the chat request they mean, bad types
// are 400s naming the field, stop reasons and the event sequence are the documented ones, and
// errors have {"type": "error", "error": {"type", "message"}}.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace qs {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string param_of(const ojson& body) {
  try {
    translate_anthropic_request(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(accepted)";
}

TEST(AnthropicRequest, SystemMessagesStopsAndSamplingMapOntoTheChatRequest) {
  const AnthropicRequest r = translate_anthropic_request(ojson::parse(R"({
      "model": "m", "max_tokens": 12, "system": [{"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}],
      "messages": [{"role": "user", "content": "Hi"}], "stop_sequences": ["END"], "temperature": 0.3, "top_k": 5,
      "metadata": {"user_id": "u"}, "thinking": {"type": "disabled"}})"));
  EXPECT_EQ(r.chat_body["messages"], ojson::parse(R"([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(r.stop_sequences, std::vector<std::string>{"END"});
  const ChatRequest parsed = parse_chat_request(r.chat_body, 1000);
  EXPECT_EQ(*parsed.fields.max_tokens, 12);
  EXPECT_EQ(parsed.fields.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(parsed.fields.sampling.temperature, 0.3f);
  EXPECT_EQ(parsed.fields.sampling.top_k, 5);
}

TEST(AnthropicRequest, ServerExtensionsMeanWhatTheyMeanOnChat) {
  // timeout (s), priority and slo_ttft_ms are qwenserve's per-request fields on every generation
  // route; a wrong value is the chat parser's 400 naming the same field.
  const AnthropicRequest r = translate_anthropic_request(ojson::parse(R"({"max_tokens": 4,
      "messages": [{"role": "user", "content": "Hi"}], "timeout": 2.5, "priority": -3, "slo_ttft_ms": 800})"));
  const ChatRequest parsed = parse_chat_request(r.chat_body, 1000);
  EXPECT_DOUBLE_EQ(*parsed.fields.timeout_s, 2.5);
  EXPECT_EQ(parsed.fields.priority, -3);
  EXPECT_DOUBLE_EQ(*parsed.fields.slo_ttft_ms, 800.0);
  const AnthropicRequest bad = translate_anthropic_request(ojson::parse(R"({"max_tokens": 4,
      "messages": [{"role": "user", "content": "Hi"}], "timeout": -1})"));
  try {
    parse_chat_request(bad.chat_body, 1000);
    ADD_FAILURE() << "timeout -1 accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "timeout");
  }
}

TEST(AnthropicRequest, ToolUseAndToolResultBlocksBecomeToolCallsAndToolMessages) {
  const AnthropicRequest r = translate_anthropic_request(ojson::parse(R"({"max_tokens": 5, "messages": [
      {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}]}],
    "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "get_weather"}})"));
  const ojson& m = r.chat_body["messages"];
  ASSERT_EQ(m.size(), 3u) << m.dump();
  EXPECT_EQ(m[1]["content"], "Checking.");
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(json::parse(m[1]["tool_calls"][0]["function"]["arguments"].get<std::string>()), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(m[2], ojson::parse(R"({"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"})"));
  EXPECT_EQ(r.chat_body["tools"][0], ojson::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": {"type": "object"}}})"));
  EXPECT_EQ(r.chat_body["tool_choice"], ojson::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_NO_THROW(parse_chat_request(r.chat_body, 1000));
}

// Per chat message, the Messages field it came from: a user turn with two tool_result blocks is
// two tool messages from one message.
TEST(AnthropicRequest, MessageParamsNameTheSourceOfEveryChatMessage) {
  const AnthropicRequest r = translate_anthropic_request(ojson::parse(R"({"max_tokens": 1, "system": "s", "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}},
                                        {"type": "tool_use", "id": "b", "name": "f", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"},
                                   {"type": "tool_result", "tool_use_id": "b", "content": "2"}]}]})"));
  ASSERT_EQ(r.chat_body["messages"].size(), 5u);
  EXPECT_EQ(r.message_params, (std::vector<std::string>{"system", "messages[0]", "messages[1]", "messages[2]", "messages[2]"}));
}

TEST(AnthropicRequest, ToolChoiceTypes) {
  auto choice = [](const char* tc) {
    return translate_anthropic_request(ojson::parse(std::string(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "tool_choice": )") + tc + "}"))
        .chat_body["tool_choice"];
  };
  EXPECT_EQ(choice(R"({"type": "auto"})"), "auto");
  EXPECT_EQ(choice(R"({"type": "any"})"), "required");
  EXPECT_EQ(choice(R"({"type": "none"})"), "none");
}

TEST(AnthropicRequest, MissingOrWrongFieldsAre400sNamingTheField) {
  EXPECT_EQ(param_of(ojson::parse(R"({"messages": [{"role": "user", "content": "x"}]})")), "max_tokens") << "max_tokens is required";
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": "5", "messages": [{"role": "user", "content": "x"}]})")), "max_tokens");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5})")), "messages");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})")), "messages[0].role");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "temperature": 1.5})")), "temperature");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stop_sequences": "END"})")), "stop_sequences");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "maybe"}})")), "tool_choice");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]})")), "tools[0].input_schema");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "", "input_schema": {}}]})")), "tools[0].name")
      << "a tool needs a name the model can call it by";
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})")), "messages[0].content[0].type");
  EXPECT_EQ(param_of(ojson::parse(R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stream": 1})")), "stream");
}

TEST(AnthropicStopReason, FollowsTheDocumentedValues) {
  EXPECT_EQ(anthropic_stop_reason("stop", "stop_token"), "end_turn");
  EXPECT_EQ(anthropic_stop_reason("stop", "stop_string"), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason("length", "max_tokens"), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("tool_calls", "stop_token"), "tool_use");
}

TEST(AnthropicError, ShapeAndTypeByStatus) {
  const json e = anthropic_error_json(ApiError(400, "bad"));
  EXPECT_EQ(e, json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
  EXPECT_EQ(anthropic_error_json(ApiError(401, "k"))["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_json(ApiError(404, "k"))["error"]["type"], "not_found_error");
  EXPECT_EQ(anthropic_error_json(ApiError(429, "k"))["error"]["type"], "rate_limit_error");
  EXPECT_EQ(anthropic_error_json(ApiError(500, "k"))["error"]["type"], "api_error");
  EXPECT_EQ(anthropic_error_json(ApiError(503, "k"))["error"]["type"], "overloaded_error");
  // Anthropic's error list has no 405; it is an issue with the request's format, not the server.
  EXPECT_EQ(anthropic_error_json(ApiError(405, "k"))["error"]["type"], "invalid_request_error");
}

json chat_completion(const std::string& content_json, const std::string& finish, const std::string& stop_cause,
                     const std::string& calls = "") {
  json message = {{"role", "assistant"}, {"content", json::parse(content_json)}};
  if (!calls.empty()) message["tool_calls"] = json::parse(calls);
  return {{"id", "chatcmpl-abc"}, {"object", "chat.completion"}, {"created", 1}, {"model", "served"},
          {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}, {"stop_cause", stop_cause}}})},
          {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 4}, {"total_tokens", 14}}}};
}

TEST(AnthropicBody, MessageObjectWithTextToolUseStopReasonAndUsage) {
  const json m = anthropic_body(chat_completion(R"("Sure.")", "tool_calls", "stop_token",
                                                R"([{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}])"),
                                {});
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(m["content"].size(), 2u);
  EXPECT_EQ(m["content"][0], json::parse(R"({"type": "text", "text": "Sure."})"));
  EXPECT_EQ(m["content"][1]["type"], "tool_use");
  EXPECT_EQ(m["content"][1]["name"], "f");
  EXPECT_EQ(m["content"][1]["input"], json::parse(R"({"a": 1})")) << "input is an object, not a string";
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["usage"]["input_tokens"], 10);
  EXPECT_EQ(m["usage"]["output_tokens"], 4);
  const json s = anthropic_body(chat_completion(R"("abc")", "stop", "stop_string"), {"END"});
  EXPECT_EQ(s["stop_reason"], "stop_sequence");
  EXPECT_EQ(s["stop_sequence"], "END");
  EXPECT_TRUE(anthropic_body(chat_completion(R"("abc")", "stop", "stop_token"), {"END"})["stop_sequence"].is_null());
}

std::vector<std::string> event_names(const std::string& sse, std::vector<json>* payloads) {
  std::vector<std::string> names;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    names.push_back(block.substr(7, nl - 7));
    payloads->push_back(json::parse(block.substr(nl + 7)));
    EXPECT_EQ(payloads->back()["type"], names.back());
  }
  return names;
}

std::string chunk(const json& delta, const json& finish = nullptr, const char* stop_cause = "stop_token") {
  json c = {{"id", "chatcmpl-abc"}, {"object", "chat.completion.chunk"}, {"created", 1}, {"model", "served"},
            {"choices", json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
  if (!finish.is_null()) c["choices"][0]["stop_cause"] = stop_cause;
  return "data: " + c.dump() + "\n\n";
}

const std::string kEnd = "data: " + json({{"choices", json::array()}, {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 3}}}}).dump() +
                         "\n\ndata: [DONE]\n\n";

// Anthropic's usage (docs.anthropic.com, "Prompt caching"): the request's input is input_tokens +
// cache_creation_input_tokens + cache_read_input_tokens, so cached prompt tokens are not in
// input_tokens.
TEST(AnthropicBody, CachedPromptTokensAreCacheReadsNotInputTokens) {
  json chat = chat_completion(R"("x")", "stop", "stop_token");
  chat["usage"]["prompt_tokens_details"] = {{"cached_tokens", 6}};
  const json u = anthropic_body(chat, {})["usage"];
  EXPECT_EQ(u["input_tokens"], 4);
  EXPECT_EQ(u["cache_read_input_tokens"], 6);
  EXPECT_EQ(u["cache_creation_input_tokens"], 0);
}

TEST(AnthropicStream, MessageDeltaCarriesTheFinalInputSplit) {
  AnthropicStreamTranslator t("chatcmpl-abc", "served", 10, {});
  std::string sse = t.translate(chunk({{"content", "x"}}));
  sse += t.translate("data: " + json({{"choices", json::array()}, {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 1},
                                      {"prompt_tokens_details", {{"cached_tokens", 6}}}}}}).dump() + "\n\ndata: [DONE]\n\n");
  std::vector<json> p;
  const std::vector<std::string> names = event_names(sse, &p);
  EXPECT_EQ(p[0]["message"]["usage"]["input_tokens"], 10) << "message_start: the whole prompt, its split not yet known";
  ASSERT_EQ(names[names.size() - 2], "message_delta");
  const json& u = p[p.size() - 2]["usage"];
  EXPECT_EQ(u["input_tokens"], 4);
  EXPECT_EQ(u["cache_read_input_tokens"], 6);
  EXPECT_EQ(u["output_tokens"], 1);
}

TEST(AnthropicStream, TextThenToolUseFollowsTheDocumentedSequence) {
  AnthropicStreamTranslator t("chatcmpl-abc", "served", 5, {});
  std::string sse = t.translate(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += t.translate(chunk({{"content", "Hi"}}));
  sse += t.translate(": keep-alive\n\n");
  sse += t.translate(chunk({{"tool_calls", json::parse(R"([{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}])")}}));
  sse += t.translate(chunk(json::object(), "tool_calls") + kEnd);
  std::vector<json> p;
  const std::vector<std::string> names = event_names(sse, &p);
  const std::vector<std::string> expected = {"message_start", "ping", "content_block_start", "content_block_delta", "ping",
                                             "content_block_stop", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(p[0]["message"]["usage"]["input_tokens"], 5);
  EXPECT_EQ(p[2]["index"], 0);
  EXPECT_EQ(p[3]["delta"], json::parse(R"({"type": "text_delta", "text": "Hi"})"));
  EXPECT_EQ(p[6]["index"], 1);
  EXPECT_EQ(p[6]["content_block"]["type"], "tool_use");
  EXPECT_EQ(p[7]["delta"]["type"], "input_json_delta");
  EXPECT_EQ(json::parse(p[7]["delta"]["partial_json"].get<std::string>()), json::parse(R"({"a": 1})"));
  EXPECT_EQ(p[9]["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(p[9]["usage"]["output_tokens"], 3);
}

TEST(AnthropicStream, StopSequenceAndEmptyReply) {
  AnthropicStreamTranslator t("chatcmpl-abc", "served", 5, {"END"});
  std::string sse = t.translate(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += t.translate(chunk(json::object(), "stop", "stop_string") + kEnd);
  std::vector<json> p;
  const std::vector<std::string> names = event_names(sse, &p);
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_stop",
                                             "message_delta", "message_stop"}));
  EXPECT_EQ(p[4]["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(p[4]["delta"]["stop_sequence"], "END");
}

TEST(AnthropicStream, ChatErrorBecomesAnErrorEventThatEndsTheStream) {
  AnthropicStreamTranslator t("chatcmpl-abc", "served", 5, {});
  std::string sse = t.translate(chunk({{"content", "x"}}));
  sse += t.translate("data: {\"error\": {\"message\": \"boom\", \"type\": \"server_error\"}}\n\n" + kEnd);
  std::vector<json> p;
  const std::vector<std::string> names = event_names(sse, &p);
  EXPECT_EQ(names.back(), "error");
  EXPECT_EQ(p.back()["error"]["message"], "boom");
  EXPECT_EQ(p.back()["error"]["type"], "api_error");
}

// Anthropic's error types (docs.anthropic.com, "Errors"): 503-class overload is overloaded_error,
// a timeout timeout_error; the stream's error event uses the same names as the error bodies.
TEST(AnthropicStream, ErrorEventTypesFollowAnthropicsNames) {
  for (const auto& [chat_type, expected] : std::vector<std::pair<std::string, std::string>>{
           {"service_unavailable", "overloaded_error"}, {"timeout", "timeout_error"}, {"server_error", "api_error"}}) {
    AnthropicStreamTranslator t("chatcmpl-abc", "served", 5, {});
    std::string sse = t.translate(chunk({{"content", "x"}}));
    sse += t.translate("data: {\"error\": {\"message\": \"m\", \"type\": \"" + chat_type + "\"}}\n\n" + kEnd);
    std::vector<json> p;
    event_names(sse, &p);
    EXPECT_EQ(p.back()["error"]["type"], expected) << chat_type;
    EXPECT_EQ(anthropic_error_json(ApiError(chat_type == "timeout" ? 408 : chat_type == "service_unavailable" ? 503 : 500, "m"))
                  ["error"]["type"],
              expected)
        << "the non-streaming body names it the same way";
  }
}

}  // namespace
}  // namespace qs
