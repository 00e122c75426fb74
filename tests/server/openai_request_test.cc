// Request bodies of /v1/chat/completions and /v1/completions against the OpenAI API reference:
// the documented field names, types and ranges (temperature 0..2, top_p 0..1, presence and
// frequency penalties -2..2, logit_bias values -100..100, top_logprobs 0..20, n >= 1,
// max_completion_tokens replacing max_tokens, stop as a string or an array, content as a string
// or text parts, the developer role), each violation a 400 invalid_request_error naming the
// field in `param`; unknown fields are ignored.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int32_t kVocab = 1000;

ojson chat_body(ojson extra = ojson::object()) {
  ojson body = {{"model", "m"}, {"messages", ojson::array({{{"role", "user"}, {"content", "Hi"}}})}};
  for (const auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

ojson completion_body(ojson extra = ojson::object()) {
  ojson body = {{"model", "m"}, {"prompt", "Once upon"}};
  for (const auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// The 400 a request gets: status, type and the param it names.
void expect_rejected(const ojson& body, const std::string& param, bool chat = true) {
  try {
    if (chat) {
      parse_chat_request(body, kVocab);
    } else {
      parse_completion_request(body, kVocab);
    }
    ADD_FAILURE() << "accepted: " << body.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body.dump();
    EXPECT_EQ(e.type(), "invalid_request_error") << body.dump();
    EXPECT_EQ(e.param(), param) << body.dump() << ": " << e.what();
  }
}

TEST(OpenAiRequest, DocumentedDefaults) {
  const ChatRequest r = parse_chat_request(chat_body(), kVocab);
  EXPECT_EQ(r.fields.model, "m");
  EXPECT_FLOAT_EQ(r.fields.sampling.temperature, 1.0f);  // OpenAI: defaults to 1
  EXPECT_FLOAT_EQ(r.fields.sampling.top_p, 1.0f);        // defaults to 1
  EXPECT_FLOAT_EQ(r.fields.sampling.presence_penalty, 0.0f);
  EXPECT_FLOAT_EQ(r.fields.sampling.frequency_penalty, 0.0f);
  EXPECT_EQ(r.fields.n, 1);                               // defaults to 1
  EXPECT_FALSE(r.fields.stream);                          // defaults to false
  EXPECT_FALSE(r.fields.logprobs);
  EXPECT_FALSE(r.fields.max_tokens.has_value());
  EXPECT_TRUE(r.fields.stop.empty());
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "Hi");
}

TEST(OpenAiRequest, SamplingRangesAreInclusiveAtTheDocumentedBounds) {
  for (const auto& [name, lo, hi] : {std::tuple{"temperature", 0.0, 2.0}, std::tuple{"presence_penalty", -2.0, 2.0},
                                     std::tuple{"frequency_penalty", -2.0, 2.0}}) {
    EXPECT_NO_THROW(parse_chat_request(chat_body({{name, lo}}), kVocab)) << name << "=" << lo;
    EXPECT_NO_THROW(parse_chat_request(chat_body({{name, hi}}), kVocab)) << name << "=" << hi;
    expect_rejected(chat_body({{name, lo - 0.01}}), name);
    expect_rejected(chat_body({{name, hi + 0.01}}), name);
    expect_rejected(chat_body({{name, "1"}}), name);  // a number, not a string
  }
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"top_p", 1.0}}), kVocab));
  expect_rejected(chat_body({{"top_p", 1.5}}), "top_p");
  expect_rejected(chat_body({{"top_p", -0.1}}), "top_p");
}

TEST(OpenAiRequest, NullMeansAbsent) {
  // OpenAI's SDKs send null for unset optional fields.
  const ChatRequest r = parse_chat_request(
      chat_body({{"temperature", nullptr}, {"max_tokens", nullptr}, {"stop", nullptr}, {"n", nullptr}}), kVocab);
  EXPECT_FLOAT_EQ(r.fields.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.fields.max_tokens.has_value());
  EXPECT_EQ(r.fields.n, 1);
}

TEST(OpenAiRequest, MaxCompletionTokensTakesPrecedenceOverDeprecatedMaxTokens) {
  EXPECT_EQ(parse_chat_request(chat_body({{"max_tokens", 7}}), kVocab).fields.max_tokens, 7);
  EXPECT_EQ(parse_chat_request(chat_body({{"max_completion_tokens", 9}}), kVocab).fields.max_tokens, 9);
  EXPECT_EQ(parse_chat_request(chat_body({{"max_tokens", 7}, {"max_completion_tokens", 9}}), kVocab).fields.max_tokens, 9);
  expect_rejected(chat_body({{"max_tokens", 0}}), "max_tokens");
  expect_rejected(chat_body({{"max_tokens", 2.5}}), "max_tokens");
  expect_rejected(chat_body({{"max_tokens", "8"}}), "max_tokens");
  expect_rejected(chat_body({{"max_completion_tokens", -1}}), "max_completion_tokens");
}

TEST(OpenAiRequest, StopIsAStringOrAnArrayOfStrings) {
  EXPECT_EQ(parse_chat_request(chat_body({{"stop", "END"}}), kVocab).fields.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(parse_chat_request(chat_body({{"stop", {"a", "b"}}}), kVocab).fields.stop,
            (std::vector<std::string>{"a", "b"}));
  expect_rejected(chat_body({{"stop", 5}}), "stop");
  expect_rejected(chat_body({{"stop", {"a", 5}}}), "stop");
}

TEST(OpenAiRequest, VllmStopExtensions) {
  // Absent: off (vLLM's defaults).
  const GenerationFields d = parse_chat_request(chat_body(), kVocab).fields;
  EXPECT_FALSE(d.ignore_eos);
  EXPECT_EQ(d.min_tokens, 0);
  EXPECT_TRUE(d.stop_token_ids.empty());
  const GenerationFields f = parse_chat_request(
      chat_body({{"ignore_eos", true}, {"min_tokens", 4}, {"max_tokens", 4}, {"stop_token_ids", {7, 0, 7, kVocab - 1}}}),
      kVocab).fields;
  EXPECT_TRUE(f.ignore_eos);
  EXPECT_EQ(f.min_tokens, 4);  // min_tokens == max_tokens is allowed
  EXPECT_EQ(f.stop_token_ids, (std::vector<int32_t>{7, 0, kVocab - 1}));  // duplicates dropped
  // min_tokens without max_tokens: the output length is bounded by the context, not by min_tokens.
  EXPECT_EQ(parse_chat_request(chat_body({{"min_tokens", 100000}}), kVocab).fields.min_tokens, 100000);
  expect_rejected(chat_body({{"ignore_eos", 1}}), "ignore_eos");
  expect_rejected(chat_body({{"min_tokens", -1}}), "min_tokens");
  expect_rejected(chat_body({{"min_tokens", 2.5}}), "min_tokens");
  expect_rejected(chat_body({{"min_tokens", 5}, {"max_tokens", 4}}), "min_tokens");
  expect_rejected(completion_body({{"min_tokens", 5}, {"max_completion_tokens", 4}}), "min_tokens", false);
  expect_rejected(chat_body({{"stop_token_ids", 7}}), "stop_token_ids");
  expect_rejected(chat_body({{"stop_token_ids", {1, kVocab}}}), "stop_token_ids[1]");
  expect_rejected(chat_body({{"stop_token_ids", {-1}}}), "stop_token_ids[0]");
  expect_rejected(chat_body({{"stop_token_ids", {"1"}}}), "stop_token_ids[0]");
  expect_rejected(chat_body({{"stop_token_ids", ojson(std::vector<int>(1025, 1))}}), "stop_token_ids");
  EXPECT_EQ(parse_chat_request(chat_body({{"stop_token_ids", ojson(std::vector<int>(1024, 1))}}), kVocab)
                .fields.stop_token_ids.size(), 1u);
}

TEST(OpenAiRequest, NIsAPositiveInteger) {
  EXPECT_EQ(parse_chat_request(chat_body({{"n", 3}}), kVocab).fields.n, 3);
  expect_rejected(chat_body({{"n", 0}}), "n");
  expect_rejected(chat_body({{"n", 1.5}}), "n");
}

TEST(OpenAiRequest, LogitBiasMapsTokenIdStringsToBiasesInPlusMinus100) {
  const ChatRequest r = parse_chat_request(chat_body({{"logit_bias", {{"5", -100}, {"17", 100}}}}), kVocab);
  ASSERT_EQ(r.fields.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.fields.sampling.logit_bias[0], (std::pair<int32_t, float>{5, -100.0f}));
  EXPECT_EQ(r.fields.sampling.logit_bias[1], (std::pair<int32_t, float>{17, 100.0f}));
  expect_rejected(chat_body({{"logit_bias", {{"5", 101}}}}), "logit_bias");
  expect_rejected(chat_body({{"logit_bias", {{"five", 1}}}}), "logit_bias");
  expect_rejected(chat_body({{"logit_bias", {{std::to_string(kVocab), 1}}}}), "logit_bias");  // not a token id
  expect_rejected(chat_body({{"logit_bias", {1, 2}}}), "logit_bias");
}

TEST(OpenAiRequest, ChatLogprobsIsABooleanWithTopLogprobs0To20) {
  const ChatRequest r = parse_chat_request(chat_body({{"logprobs", true}, {"top_logprobs", 20}}), kVocab);
  EXPECT_TRUE(r.fields.logprobs);
  EXPECT_EQ(r.fields.top_logprobs, 20);
  expect_rejected(chat_body({{"logprobs", 1}}), "logprobs");
  expect_rejected(chat_body({{"logprobs", true}, {"top_logprobs", 21}}), "top_logprobs");
  expect_rejected(chat_body({{"logprobs", true}, {"top_logprobs", -1}}), "top_logprobs");
  // OpenAI's reference: "logprobs must be set to true if this parameter is used" (vLLM: 400).
  expect_rejected(chat_body({{"top_logprobs", 2}}), "top_logprobs");
  expect_rejected(chat_body({{"logprobs", false}, {"top_logprobs", 1}}), "top_logprobs");
  EXPECT_EQ(parse_chat_request(chat_body({{"top_logprobs", 0}}), kVocab).fields.top_logprobs, 0);
}

TEST(OpenAiRequest, UserIsAStringWhenPresent) {
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"user", "user-1234"}}), kVocab));
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"user", nullptr}}), kVocab));
  expect_rejected(chat_body({{"user", 5}}), "user");
  expect_rejected(chat_body({{"user", {{"id", "x"}}}}), "user");
}

// A discriminator of the wrong JSON type ("type": 1 / null) is a client error naming the field,
// never a 500 (nlohmann's value() throws type_error 302 on a non-string member).
TEST(OpenAiRequest, WrongTypedTypeFieldsAre400s) {
  expect_rejected(chat_body({{"messages", {{{"role", "user"}, {"content", {{{"type", 1}}}}}}}}),
                  "messages[0].content[0].type");
  for (const ojson& type : {ojson(1), ojson::array(), ojson::object()}) {
    try {
      parse_chat_request(chat_body({{"tool_choice", {{"type", type}}}}), kVocab);
      ADD_FAILURE() << "tool_choice type " << type.dump() << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << type.dump() << ": " << e.what();
      EXPECT_EQ(e.param(), "tool_choice") << e.what();
    }
  }
}

TEST(OpenAiRequest, StreamOptionsIncludeUsage) {
  const ChatRequest r =
      parse_chat_request(chat_body({{"stream", true}, {"stream_options", {{"include_usage", true}}}}), kVocab);
  EXPECT_TRUE(r.fields.stream);
  EXPECT_TRUE(r.fields.include_usage);
  expect_rejected(chat_body({{"stream", "yes"}}), "stream");
  expect_rejected(chat_body({{"stream_options", true}}), "stream_options");
  // OpenAI's rule: "stream_options" only on a streaming request (400 otherwise); null is absent.
  expect_rejected(chat_body({{"stream_options", {{"include_usage", true}}}}), "stream_options");
  expect_rejected(chat_body({{"stream", false}, {"stream_options", ojson::object()}}), "stream_options");
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"stream_options", nullptr}}), kVocab));
  // A wrong type inside it names the nested field in full.
  expect_rejected(chat_body({{"stream", true}, {"stream_options", {{"include_usage", "yes"}}}}),
                  "stream_options.include_usage");
  expect_rejected(chat_body({{"stream", true}, {"stream_options", {{"include_timings", 1}}}}),
                  "stream_options.include_timings");
}

TEST(OpenAiRequest, MessagesNeedAKnownRoleAndContent) {
  expect_rejected(chat_body({{"messages", nullptr}}), "messages");
  expect_rejected(chat_body({{"messages", ojson::array()}}), "messages");
  expect_rejected(chat_body({{"messages", "Hi"}}), "messages");
  expect_rejected(chat_body({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), "messages[0].role");
  expect_rejected(chat_body({{"messages", {{{"role", "user"}}}}}), "messages[0].content");
  expect_rejected(chat_body({{"messages", {{{"role", "user"}, {"content", "a"}}, 5}}}), "messages[1]");
  // An assistant message may have no content (it called tools).
  EXPECT_NO_THROW(parse_chat_request(
      chat_body({{"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", nullptr}}}}}),
      kVocab));
}

TEST(OpenAiRequest, ContentPartsOfTypeTextAreJoined) {
  const ojson parts = ojson::array({{{"type", "text"}, {"text", "Hello, "}}, {{"type", "text"}, {"text", "world"}}});
  const ChatRequest r = parse_chat_request(chat_body({{"messages", {{{"role", "user"}, {"content", parts}}}}}), kVocab);
  EXPECT_EQ(r.messages[0]["content"], "Hello, world");
  const ojson image = ojson::array({{{"type", "image_url"}, {"image_url", {{"url", "http://x"}}}}});
  expect_rejected(chat_body({{"messages", {{{"role", "user"}, {"content", image}}}}}), "messages[0].content[0].type");
  // OpenAI's reference: content arrays have a minimum length of 1 (an empty one is a 400).
  expect_rejected(chat_body({{"messages", {{{"role", "user"}, {"content", ojson::array()}}}}}), "messages[0].content");
}

// The message of a 400, after checking its param.
std::string rejection_message(const ojson& body, const std::string& param, bool chat = true) {
  try {
    if (chat) {
      parse_chat_request(body, kVocab);
    } else {
      parse_completion_request(body, kVocab);
    }
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body.dump();
    EXPECT_EQ(e.param(), param) << body.dump() << ": " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

ojson user_parts(ojson parts) { return chat_body({{"messages", {{{"role", "user"}, {"content", std::move(parts)}}}}}); }

// OpenAI's text content part is {"type": "text", "text": string}, both required: a text part
// without a string `text` is a 400 naming that member (it was "only text parts are supported").
TEST(OpenAiRequest, TextPartWithoutAStringTextNamesTheTextMember) {
  const std::string missing = rejection_message(user_parts(ojson::array({ojson{{"type", "text"}}})), "messages[0].content[0].text");
  EXPECT_NE(missing.find("messages[0].content[0].text is required"), std::string::npos) << missing;
  const std::string wrong = rejection_message(user_parts(ojson::array({ojson{{"type", "text"}, {"text", 5}}})), "messages[0].content[0].text");
  EXPECT_NE(wrong.find("must be a string"), std::string::npos) << wrong;
  const ojson second = ojson::array({ojson{{"type", "text"}, {"text", "a"}}, ojson{{"type", "text"}, {"text", nullptr}}});
  rejection_message(user_parts(second), "messages[0].content[1].text");
  rejection_message(user_parts(ojson::array({5})), "messages[0].content[0]");
}

// OpenAI's roles for chat messages: developer, system, user, assistant, tool (function is
// deprecated); developer is accepted, so the error lists it.
TEST(OpenAiRequest, RoleErrorListsEveryAcceptedRole) {
  const std::string message =
      rejection_message(chat_body({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), "messages[0].role");
  for (const char* role : {"system", "developer", "user", "assistant", "tool"}) {
    EXPECT_NE(message.find(role), std::string::npos) << role << " missing from: " << message;
  }
}

// top_p is nucleus sampling's probability mass, in (0, 1] (vLLM: "top_p must be in (0, 1]"): 0 and
// 2 get the same message, stating that range.
TEST(OpenAiRequest, TopPOutOfRangeStatesTheOneTrueRange) {
  const std::string zero = rejection_message(chat_body({{"top_p", 0}}), "top_p");
  const std::string two = rejection_message(chat_body({{"top_p", 2}}), "top_p");
  EXPECT_NE(zero.find("(0.0, 1.0]"), std::string::npos) << zero;
  EXPECT_NE(two.find("(0.0, 1.0]"), std::string::npos) << two;
  EXPECT_EQ(zero.substr(0, zero.find(", got")), two.substr(0, two.find(", got")));
  EXPECT_FLOAT_EQ(parse_chat_request(chat_body({{"top_p", 1e-9}}), kVocab).fields.sampling.top_p, 1e-9f);
  rejection_message(chat_body({{"top_p", "0.5"}}), "top_p");
}

// OpenAI's prompt may be a list of strings or a list of token lists (several prompts); this
// server takes one prompt per request, and says so instead of calling the ids invalid.
TEST(OpenAiRequest, BatchedPromptsAreRefusedAsBatches) {
  for (const ojson& prompt : {ojson::array({"Hello", "World"}), ojson::array({ojson::array({9707, 11}), ojson::array({1879})}),
                              ojson::array({ojson::array({1, 2}), "x"})}) {
    const std::string message = rejection_message(completion_body({{"prompt", prompt}}), "prompt", false);
    EXPECT_NE(message.find("batched prompts"), std::string::npos) << prompt.dump() << ": " << message;
    EXPECT_EQ(message.find("token ids must be"), std::string::npos) << message;
  }
  // A list holding one prompt is that prompt.
  EXPECT_EQ(parse_completion_request(completion_body({{"prompt", ojson::array({ojson::array({9, 11})})}}), kVocab).prompt_ids,
            (std::vector<int32_t>{9, 11}));
}

TEST(OpenAiRequest, DeveloperRoleIsTheSystemRole) {
  const ChatRequest r = parse_chat_request(
      chat_body({{"messages", {{{"role", "developer"}, {"content", "Be brief"}}, {{"role", "user"}, {"content", "Hi"}}}}}),
      kVocab);
  EXPECT_EQ(r.messages[0]["role"], "system");
}

TEST(OpenAiRequest, ToolCallArgumentsSentAsAJsonStringReachTheTemplateAsAnObject) {
  const ojson call = {{"id", "call_1"}, {"type", "function"},
                      {"function", {{"name", "f"}, {"arguments", R"({"city": "Paris"})"}}}};
  const ChatRequest r = parse_chat_request(
      chat_body({{"messages", {{{"role", "user"}, {"content", "a"}},
                               {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}}}}}),
      kVocab);
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"], (ojson{{"city", "Paris"}}));
}

// Conversations the chat template (Qwen3's) cannot render as meant are 400s naming the message
// and field (OpenAI's own rules: tool results answer an assistant turn's tool_calls; arguments
// are a JSON object, sent as a string; vLLM decodes them and treats absent / "" as {}).
TEST(OpenAiRequest, MessagesAreValidatedAsTheChatTemplateNeedsThem) {
  const ojson user = {{"role", "user"}, {"content", "q"}};
  auto with_call = [](ojson function) {
    return ojson{{"role", "assistant"}, {"content", nullptr},
                 {"tool_calls", {{{"id", "c1"}, {"type", "function"}, {"function", std::move(function)}}}}};
  };
  auto messages = [&](ojson list) { return chat_body({{"messages", std::move(list)}}); };
  const std::string args = "messages[1].tool_calls[0].function.arguments";
  expect_rejected(messages({user, with_call({{"name", "f"}, {"arguments", "{not json"}})}), args);
  expect_rejected(messages({user, with_call({{"name", "f"}, {"arguments", "[1, 2]"}})}), args);
  expect_rejected(messages({user, with_call({{"name", "f"}, {"arguments", 5}})}), args);
  expect_rejected(messages({user, with_call({{"name", "f"}, {"arguments", ojson::array()}})}), args);
  expect_rejected(messages({user, with_call({{"arguments", "{}"}})}), "messages[1].tool_calls[0].function.name");
  expect_rejected(messages({user, with_call({{"name", 3}, {"arguments", "{}"}})}), "messages[1].tool_calls[0].function.name");
  ojson no_function = with_call({{"name", "f"}});
  no_function["tool_calls"][0].erase("function");
  expect_rejected(messages({user, no_function}), "messages[1].tool_calls[0].function");
  ojson bad_type = with_call({{"name", "f"}});
  bad_type["tool_calls"][0]["type"] = "code";
  expect_rejected(messages({user, bad_type}), "messages[1].tool_calls[0].type");
  expect_rejected(messages({user, {{"role", "assistant"}, {"content", "a"}, {"reasoning_content", 5}}}),
                  "messages[1].reasoning_content");
  expect_rejected(messages({user, {{"role", "user"}, {"content", "a"}, {"name", ojson::array()}}}), "messages[1].name");
  expect_rejected(messages({{{"role", 1}, {"content", "a"}}}), "messages[0].role");
  // A tool result must answer tool calls: after a user turn, or first, it is a 400 on its role.
  const ojson tool = {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "r"}};
  expect_rejected(messages({user, tool}), "messages[1].role");
  expect_rejected(messages({tool, user}), "messages[0].role");
  expect_rejected(messages({user, {{"role", "assistant"}, {"content", "a"}}, tool}), "messages[2].role");
  ojson bad_id = tool;
  bad_id["tool_call_id"] = 1;
  expect_rejected(messages({user, with_call({{"name", "f"}, {"arguments", "{}"}}), bad_id}), "messages[2].tool_call_id");
  // Accepted: results right after the calls (several in a row), absent / empty arguments as {}.
  const ChatRequest ok = parse_chat_request(
      messages({user, with_call({{"name", "f"}, {"arguments", ""}}), tool, tool,
                {{"role", "assistant"}, {"content", "done"}}, user, with_call({{"name", "g"}}), tool}),
      kVocab);
  EXPECT_EQ(ok.messages[1]["tool_calls"][0]["function"]["arguments"], ojson::object());
  EXPECT_EQ(ok.messages[6]["tool_calls"][0]["function"]["arguments"], ojson::object());
}

// OpenAI's ChatCompletionTool: {"type": "function", "function": {"name": string, "description"?:
// string, "parameters"?: JSON Schema object, "strict"?: boolean}}. Checked with no tool_choice
// (auto): the template prints every tool into the prompt, so junk must not get that far.
TEST(OpenAiRequest, ToolsAreValidatedWithoutAForcedToolChoice) {
  const ojson fn = {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}};
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"tools", {{{"type", "function"}, {"function", fn}}}}}), kVocab));
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"tools", {{{"function", {{"name", "f"}}}}}}}), kVocab))
      << "type absent: function (vLLM's default); parameters optional";
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"tools", ojson::array()}}), kVocab));
  const std::vector<std::pair<ojson, std::string>> cases = {
      {ojson::array({1}), "tools[0]"},
      {ojson::array({"f"}), "tools[0]"},
      {ojson::array({{{"type", "function"}}}), "tools[0].function"},
      {ojson::array({{{"type", "function"}, {"function", "f"}}}), "tools[0].function"},
      {ojson::array({{{"type", "retrieval"}, {"function", fn}}}), "tools[0].type"},
      {ojson::array({{{"type", "function"}, {"function", {{"name", 5}}}}}), "tools[0].function.name"},
      {ojson::array({{{"type", "function"}, {"function", {{"description", "no name"}}}}}), "tools[0].function.name"},
      {ojson::array({{{"type", "function"}, {"function", {{"name", ""}}}}}), "tools[0].function.name"},
      {ojson::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}),
       "tools[0].function.parameters"},
      {ojson::array({{{"type", "function"}, {"function", {{"name", "f"}, {"description", 1}}}}}),
       "tools[0].function.description"},
      {ojson::array({{{"type", "function"}, {"function", {{"name", "f"}, {"strict", "yes"}}}}}),
       "tools[0].function.strict"},
      {ojson::array({{{"type", "function"}, {"function", fn}}, 7}), "tools[1]"},
  };
  for (const auto& [tools, param] : cases) {
    expect_rejected(chat_body({{"tools", tools}}), param);
    expect_rejected(chat_body({{"tools", tools}, {"tool_choice", "auto"}}), param);
  }
}

TEST(OpenAiRequest, ToolsIsAnArrayAndChatTemplateKwargsAnObject) {
  expect_rejected(chat_body({{"tools", {{"type", "function"}}}}), "tools");
  expect_rejected(chat_body({{"chat_template_kwargs", "x"}}), "chat_template_kwargs");
  const ChatRequest r = parse_chat_request(chat_body({{"chat_template_kwargs", {{"enable_thinking", false}}}}), kVocab);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
}

TEST(OpenAiRequest, TemplateControlsAreBooleansAndKwargsAnObject) {
  // vLLM's chat-template fields: a wrong type is a 400 naming the field, never a 500.
  for (const char* name : {"add_generation_prompt", "continue_final_message"}) {
    for (const ojson& wrong : {ojson("yes"), ojson(1), ojson::array(), ojson::object()}) {
      expect_rejected(chat_body({{name, wrong}}), name);
    }
  }
  for (const ojson& wrong : {ojson("x"), ojson(1), ojson::array(), ojson(true)}) {
    expect_rejected(chat_body({{"chat_template_kwargs", wrong}}), "chat_template_kwargs");
  }
  const ChatRequest defaults = parse_chat_request(chat_body(), kVocab);
  EXPECT_TRUE(defaults.add_generation_prompt);
  EXPECT_FALSE(defaults.continue_final_message);
  const ChatRequest cont =
      parse_chat_request(chat_body({{"add_generation_prompt", false}, {"continue_final_message", true}}), kVocab);
  EXPECT_FALSE(cont.add_generation_prompt);
  EXPECT_TRUE(cont.continue_final_message);
  // The two cannot hold at once (vLLM and Hugging Face reject it).
  expect_rejected(chat_body({{"continue_final_message", true}}), "continue_final_message");
}

TEST(OpenAiRequest, UnknownFieldsAreIgnored) {
  const ChatRequest r = parse_chat_request(
      chat_body({{"user", "u-1"}, {"metadata", {{"k", "v"}}}, {"store", false}, {"some_future_field", {1, 2}}}), kVocab);
  EXPECT_EQ(r.messages.size(), 1u);
  // Unknown fields inside a message (Anthropic-style cache_control, a name) are kept for the template.
  EXPECT_NO_THROW(parse_chat_request(
      chat_body({{"messages", {{{"role", "user"}, {"content", "a"}, {"name", "bob"}, {"cache_control", {{"type", "ephemeral"}}}}}}}),
      kVocab));
  EXPECT_NO_THROW(parse_completion_request(completion_body({{"suffix", nullptr}, {"best_of", 1}}), kVocab));
}

TEST(OpenAiRequest, BodyMustBeAnObject) {
  for (const ojson& body : {ojson::array(), ojson("x"), ojson(3), ojson(nullptr)}) {
    EXPECT_THROW(parse_chat_request(body, kVocab), ApiError) << body.dump();
    EXPECT_THROW(parse_completion_request(body, kVocab), ApiError) << body.dump();
  }
}

// Every other body error carries a code (invalid_json, json_too_deep); a body that is JSON but not
// an object gets one too (it was null), with OpenAI's invalid_request_error type.
TEST(OpenAiRequest, NonObjectBodyErrorHasACode) {
  for (const ojson& body : {ojson::array(), ojson(nullptr)}) {
    for (const bool chat : {true, false}) {
      try {
        chat ? (void)parse_chat_request(body, kVocab) : (void)parse_completion_request(body, kVocab);
        ADD_FAILURE() << "accepted " << body.dump();
      } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_EQ(e.type(), "invalid_request_error");
        EXPECT_EQ(e.code(), "invalid_body") << body.dump();
        EXPECT_TRUE(e.to_json()["error"]["code"].is_string());
      }
    }
  }
}

TEST(OpenAiRequest, CompletionPromptIsAStringOrTokenIds) {
  EXPECT_EQ(parse_completion_request(completion_body(), kVocab).prompt_text, "Once upon");
  EXPECT_EQ(parse_completion_request(completion_body({{"prompt", {"single"}}}), kVocab).prompt_text, "single");
  EXPECT_EQ(parse_completion_request(completion_body({{"prompt", {1, 2, 3}}}), kVocab).prompt_ids,
            (std::vector<int32_t>{1, 2, 3}));
  expect_rejected(completion_body({{"prompt", nullptr}}), "prompt", false);
  expect_rejected(completion_body({{"prompt", ""}}), "prompt", false);
  expect_rejected(completion_body({{"prompt", ojson::array()}}), "prompt", false);
  expect_rejected(completion_body({{"prompt", {1, kVocab}}}), "prompt", false);  // outside the vocabulary
  expect_rejected(completion_body({{"prompt", {1, -1}}}), "prompt", false);
  expect_rejected(completion_body({{"prompt", 5}}), "prompt", false);
}

TEST(OpenAiRequest, CompletionLogprobsIsAnIntegerCountAndEchoABoolean) {
  const CompletionRequest r = parse_completion_request(completion_body({{"logprobs", 3}, {"echo", true}}), kVocab);
  EXPECT_TRUE(r.fields.logprobs);
  EXPECT_EQ(r.fields.top_logprobs, 3);
  EXPECT_TRUE(r.fields.echo);
  EXPECT_FALSE(parse_completion_request(completion_body(), kVocab).fields.logprobs) << "absent: no logprobs";
  expect_rejected(completion_body({{"logprobs", true}}), "logprobs", false);
  expect_rejected(completion_body({{"echo", 1}}), "echo", false);
}

}  // namespace
}  // namespace qs
