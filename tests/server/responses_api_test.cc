// /v1/responses translation (responses_api.h) against the OpenAI API reference ("Responses",
// "Streaming events"): request fields map onto the chat request they mean, bad types are 400s
// naming the Responses field, previous_response_id is refused (stateless), and a chat completion
// or chunk stream becomes a `response` object / the documented event sequence.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/responses_api.h"

namespace qs {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string param_of(const ojson& body) {
  try {
    translate_responses_request(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(accepted)";
}

// Per chat message, the Responses field it came from: consecutive function_call items are one
// assistant message (named by the first).
TEST(ResponsesRequest, MessageParamsNameTheSourceOfEveryChatMessage) {
  const ResponsesRequest r = translate_responses_request(ojson::parse(R"({"instructions": "i", "input": [
      {"role": "user", "content": "q"},
      {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
      {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "a", "output": "1"}]})"));
  ASSERT_EQ(r.chat_body["messages"].size(), 4u);
  EXPECT_EQ(r.message_params, (std::vector<std::string>{"instructions", "input[0]", "input[1]", "input[3]"}));
  EXPECT_EQ(translate_responses_request(ojson::parse(R"({"input": "q"})")).message_params, std::vector<std::string>{"input"});
}

TEST(ResponsesRequest, TextInputWithInstructionsBecomesSystemAndUserMessages) {
  const ResponsesRequest r = translate_responses_request(
      ojson::parse(R"({"model": "m", "input": "Hi", "instructions": "Be terse.", "max_output_tokens": 7,
                      "temperature": 0.5, "top_p": 0.9, "metadata": {"a": "b"}, "user": "u", "store": false})"));
  const ojson& chat = r.chat_body;
  EXPECT_EQ(chat["messages"], ojson::parse(R"([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(chat["max_tokens"], 7);
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_FALSE(chat.contains("user")) << "unknown fields are dropped";
  const ChatRequest parsed = parse_chat_request(chat, 1000);
  EXPECT_EQ(*parsed.fields.max_tokens, 7);
  EXPECT_FLOAT_EQ(parsed.fields.sampling.top_p, 0.9f);
  EXPECT_EQ(r.echo["instructions"], "Be terse.");
  EXPECT_EQ(r.echo["store"], false);
}

TEST(ResponsesRequest, WrongTypedTypeFieldsAre400s) {
  for (const char* body : {R"({"input": "hi", "tools": [{"type": 1}]})", R"({"input": "hi", "tool_choice": {"type": 1}})",
                           R"({"input": [{"type": 7, "role": "user", "content": "hi"}]})"}) {
    try {
      const ResponsesRequest r = translate_responses_request(ojson::parse(body));
      parse_chat_request(r.chat_body, 1000);
      ADD_FAILURE() << body << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body << ": " << e.what();
      EXPECT_FALSE(e.param().empty()) << body;
    }
  }
}

TEST(ResponsesRequest, ServerExtensionsMeanWhatTheyMeanOnChat) {
  const ResponsesRequest r = translate_responses_request(
      ojson::parse(R"({"input": "Hi", "timeout": 0.5, "priority": 2, "slo_ttft_ms": 1500})"));
  const ChatRequest parsed = parse_chat_request(r.chat_body, 1000);
  EXPECT_DOUBLE_EQ(*parsed.fields.timeout_s, 0.5);
  EXPECT_EQ(parsed.fields.priority, 2);
  EXPECT_DOUBLE_EQ(*parsed.fields.slo_ttft_ms, 1500.0);
  const ResponsesRequest bad = translate_responses_request(ojson::parse(R"({"input": "Hi", "priority": "high"})"));
  try {
    parse_chat_request(bad.chat_body, 1000);
    ADD_FAILURE() << "priority \"high\" accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "priority");
  }
}

TEST(ResponsesRequest, FunctionCallRoundTripItemsBecomeToolCallsAndToolMessages) {
  const ResponsesRequest r = translate_responses_request(ojson::parse(R"({"input": [
      {"role": "user", "content": [{"type": "input_text", "text": "Weather in "}, {"type": "input_text", "text": "Paris?"}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
    "tools": [{"type": "function", "name": "get_weather", "description": "d", "parameters": {"type": "object"}}],
    "tool_choice": {"type": "function", "name": "get_weather"}})"));
  const ojson& m = r.chat_body["messages"];
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0]["content"], "Weather in Paris?");
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m[2], ojson::parse(R"({"role": "tool", "tool_call_id": "call_1", "content": "sunny"})"));
  EXPECT_EQ(r.chat_body["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.chat_body["tools"][0]["function"]["parameters"], ojson::parse(R"({"type": "object"})"));
  EXPECT_EQ(r.chat_body["tool_choice"], ojson::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  const ChatRequest parsed = parse_chat_request(r.chat_body, 1000);
  EXPECT_EQ(parsed.messages[1]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
}

TEST(ResponsesRequest, TextFormatJsonSchemaBecomesResponseFormat) {
  const ResponsesRequest r = translate_responses_request(ojson::parse(
      R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": true}}})"));
  EXPECT_EQ(r.chat_body["response_format"],
            ojson::parse(R"({"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}, "strict": true}})"));
  EXPECT_FALSE(translate_responses_request(ojson::parse(R"({"input": "x", "text": {"format": {"type": "text"}}})")).chat_body.contains("response_format"));
}

TEST(ResponsesRequest, WrongTypesAndStatefulFieldsAre400sNamingTheField) {
  EXPECT_EQ(param_of(ojson::parse(R"({"input": "x", "previous_response_id": "resp_1"})")), "previous_response_id");
  EXPECT_EQ(param_of(ojson::parse(R"({})")), "input");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": 5})")), "input");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": "x", "instructions": 1})")), "instructions");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": "x", "max_output_tokens": "9"})")), "max_output_tokens");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": "x", "stream": "yes"})")), "stream");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": "x", "tools": [{"type": "web_search"}]})")), "tools[0].type");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": "x", "tool_choice": "sometimes"})")), "tool_choice");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": "x", "text": {"format": {"type": "xml"}}})")), "text.format.type");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": [{"role": "robot", "content": "x"}]})")), "input[0].role");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": [{"type": "input_image"}]})")), "input[0].type");
  EXPECT_EQ(param_of(ojson::parse(R"({"input": [{"type": "function_call_output", "output": "x"}]})")), "input[0].call_id");
  // Same field as chat: the chat parser checks the range.
  const ResponsesRequest r = translate_responses_request(ojson::parse(R"({"input": "x", "temperature": 3})"));
  EXPECT_THROW(parse_chat_request(r.chat_body, 1000), ApiError);
}

json chat_completion(const std::string& content_json, const std::string& finish, const std::string& calls = "") {
  json message = {{"role", "assistant"}, {"content", json::parse(content_json)}};
  if (!calls.empty()) message["tool_calls"] = json::parse(calls);
  return {{"id", "chatcmpl-abc"}, {"object", "chat.completion"}, {"created", 1700000000}, {"model", "served"},
          {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}, {"stop_cause", "stop_token"}}})},
          {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 4}, {"total_tokens", 14}, {"prompt_tokens_details", {{"cached_tokens", 2}}}}}};
}

TEST(ResponsesBody, TextReplyIsOneMessageItemWithUsage) {
  const json r = responses_body(chat_completion(R"("Hello")", "stop"), json{{"instructions", nullptr}});
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["created_at"], 1700000000);
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["type"], "message");
  EXPECT_EQ(r["output"][0]["role"], "assistant");
  EXPECT_EQ(r["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(r["usage"]["input_tokens"], 10);
  EXPECT_EQ(r["usage"]["output_tokens"], 4);
  EXPECT_EQ(r["usage"]["total_tokens"], 14);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 2);
  EXPECT_TRUE(r.contains("instructions"));
}

TEST(ResponsesBody, ToolCallsAreFunctionCallItemsAndLengthIsIncomplete) {
  const json r = responses_body(
      chat_completion("null", "tool_calls", R"([{"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}])"),
      json::object());
  ASSERT_EQ(r["output"].size(), 1u) << "no empty message next to a tool call";
  EXPECT_EQ(r["output"][0]["type"], "function_call");
  EXPECT_EQ(r["output"][0]["call_id"], "call_9");
  EXPECT_EQ(r["output"][0]["name"], "f");
  EXPECT_EQ(r["output"][0]["arguments"], "{\"a\":1}");
  const json cut = responses_body(chat_completion(R"("abc")", "length"), json::object());
  EXPECT_EQ(cut["status"], "incomplete");
  EXPECT_EQ(cut["incomplete_details"]["reason"], "max_output_tokens");
  // OpenAI's Response object: the output message cut at max_output_tokens is "incomplete" too,
  // and keeps the text generated so far.
  ASSERT_EQ(cut["output"].size(), 1u);
  EXPECT_EQ(cut["output"][0]["status"], "incomplete");
  EXPECT_EQ(cut["output"][0]["content"][0]["text"], "abc");
  EXPECT_EQ(r["output"][0]["status"], "completed");
}

std::vector<json> parse_events(const std::string& sse, std::vector<std::string>* names) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    const std::string name = block.substr(7, nl - 7);
    json data = json::parse(block.substr(nl + 7));
    EXPECT_EQ(data["type"], name) << "the event name repeats the payload's type";
    names->push_back(name);
    out.push_back(data);
  }
  return out;
}

std::string chunk(const json& delta, const json& finish = nullptr) {
  json c = {{"id", "chatcmpl-abc"}, {"object", "chat.completion.chunk"}, {"created", 1}, {"model", "served"},
            {"choices", json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
  if (!finish.is_null()) c["choices"][0]["stop_cause"] = "stop_token";
  return "data: " + c.dump() + "\n\n";
}

const std::string kUsage = "data: " + json({{"id", "chatcmpl-abc"}, {"choices", json::array()},
                                             {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 2}, {"total_tokens", 7}}}}).dump() + "\n\n";

TEST(ResponsesStream, TextStreamFollowsTheDocumentedSequence) {
  ResponsesStreamTranslator t("chatcmpl-abc", "served", 1, json::object());
  std::string sse = t.translate(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += t.translate(chunk({{"content", "Hel"}}));
  sse += t.translate(chunk({{"content", "lo"}}) + chunk(json::object(), "stop"));
  sse += t.translate(kUsage + "data: [DONE]\n\n");
  std::vector<std::string> names;
  const std::vector<json> events = parse_events(sse, &names);
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(names, expected);
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["sequence_number"], i);
  EXPECT_EQ(events[6]["text"], "Hello");
  const json& done = events.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["usage"]["output_tokens"], 2);
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
}

TEST(ResponsesStream, ToolCallStreamHasArgumentDeltasAndDone) {
  ResponsesStreamTranslator t("chatcmpl-abc", "served", 1, json::object());
  std::string sse = t.translate(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += t.translate(chunk({{"tool_calls", json::parse(R"([{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}])")}}));
  sse += t.translate(chunk({{"tool_calls", json::parse(R"([{"index": 0, "function": {"arguments": "{\"a\":"}}])")}}));
  sse += t.translate(chunk({{"tool_calls", json::parse(R"([{"index": 0, "function": {"arguments": "1}"}}])")}}));
  sse += t.translate(chunk(json::object(), "tool_calls") + kUsage + "data: [DONE]\n\n");
  std::vector<std::string> names;
  const std::vector<json> events = parse_events(sse, &names);
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress", "response.output_item.added",
      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(events[5]["arguments"], "{\"a\":1}");
  EXPECT_EQ(events[6]["item"]["call_id"], "call_1");
  EXPECT_EQ(events.back()["response"]["output"][0]["type"], "function_call");
}

TEST(ResponsesStream, ChatErrorBecomesErrorThenFailed) {
  ResponsesStreamTranslator t("chatcmpl-abc", "served", 1, json::object());
  std::string sse = t.translate(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += t.translate("data: {\"error\": {\"message\": \"boom\", \"type\": \"server_error\", \"code\": null}}\n\n" + kUsage + "data: [DONE]\n\n");
  std::vector<std::string> names;
  const std::vector<json> events = parse_events(sse, &names);
  EXPECT_EQ(names, (std::vector<std::string>{"response.created", "response.in_progress", "error", "response.failed"}));
  EXPECT_EQ(events.back()["response"]["status"], "failed");
  EXPECT_EQ(events.back()["response"]["error"]["message"], "boom");
}

TEST(ResponsesStream, ErrorMidReplyKeepsTheStreamedTextAsAnIncompleteItem) {
  ResponsesStreamTranslator t("chatcmpl-abc", "served", 1, json::object());
  std::string sse = t.translate(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += t.translate(chunk({{"content", "Hel"}}));
  sse += t.translate("data: {\"error\": {\"message\": \"timed out\", \"type\": \"timeout\", \"code\": \"request_timeout\"}}\n\n" +
                     kUsage + "data: [DONE]\n\n");
  std::vector<std::string> names;
  const std::vector<json> events = parse_events(sse, &names);
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done", "error", "response.failed"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(events[7]["item"]["status"], "incomplete");
  const json& failed = events.back()["response"];
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["error"]["code"], "request_timeout");
  ASSERT_EQ(failed["output"].size(), 1u);
  EXPECT_EQ(failed["output"][0]["status"], "incomplete");
  EXPECT_EQ(failed["output"][0]["content"][0]["text"], "Hel");
  EXPECT_EQ(failed["usage"]["output_tokens"], 2);
}

TEST(ResponsesStream, ReplyCutAtMaxOutputTokensEndsIncompleteWithItsText) {
  ResponsesStreamTranslator t("chatcmpl-abc", "served", 1, json::object());
  std::string sse = t.translate(chunk({{"role", "assistant"}, {"content", ""}}));
  sse += t.translate(chunk({{"content", "Hel"}}) + chunk(json::object(), "length"));
  sse += t.translate(kUsage + "data: [DONE]\n\n");
  std::vector<std::string> names;
  const std::vector<json> events = parse_events(sse, &names);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(names.back(), "response.incomplete");
  EXPECT_EQ(names[names.size() - 2], "response.output_item.done");
  EXPECT_EQ(events[events.size() - 2]["item"]["status"], "incomplete");
  const json& done = events.back()["response"];
  EXPECT_EQ(done["status"], "incomplete");
  EXPECT_EQ(done["output"][0]["status"], "incomplete");
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Hel");
}

}  // namespace
}  // namespace qs
