// Anthropic Messages request bodies (POST /v1/messages, server/anthropic_api.h) as the route
// handles them: parse_json_limited, translate_anthropic_request, parse_chat_request, then the chat
// job with the real Qwen3 tokenizer and template (build_chat_job).
//
// Invariants:
//  - bad input only throws ApiError with a 4xx status, and its Anthropic error body is
//    {"type": "error", "error": {"type", "message"}} with the type of Anthropic's table for the
//    status (API reference, "Errors": 400 invalid_request_error, 404 not_found_error) and a
//    message that serialises; the translator's refusals are 400s whose `param` is a path rooted at
//    a field of the body (or `max_tokens` / `messages`, the required ones);
//  - stop_sequences come back as given; `stream` as the chat body's;
//  - the chat body written back as a Messages body (messages_body_for below, the mapping of
//    anthropic_api.h run backwards) translates to the same chat body, key order included;
//  - the job: as openai_request_fuzz (valid UTF-8 prompt, ids in the vocabulary, fits the context).
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "request_checks.h"
#include "server/anthropic_api.h"
#include "server/openai_request.h"

namespace {

using ojson = nlohmann::ordered_json;
using qs::fuzz::check;

void expect_anthropic_error(const qs::ApiError& e) {
  qs::fuzz::expect_client_error(e);
  const nlohmann::json body = qs::anthropic_error_json(e);
  const char* type = e.status() == 400 ? "invalid_request_error" : e.status() == 404 ? "not_found_error" : nullptr;
  check(type != nullptr, "unexpected status " + std::to_string(e.status()));
  check(body.size() == 2 && body.value("type", "") == "error" && body.contains("error") && body["error"].size() == 2 &&
            body["error"].value("type", "") == type && body["error"].value("message", "") == e.what(),
        "malformed Anthropic error body: " + body.dump());
}

// One chat message -> one Messages message. A tool message is a user message with one
// tool_result block (the translator merges nothing across messages), an assistant message with
// tool_calls has a text block (when its text is not empty) and one tool_use block per call (input:
// the parsed arguments), any other message keeps its string content.
ojson message_for(const ojson& m) {
  const std::string role = m.at("role").get<std::string>();
  if (role == "tool") {
    return {{"role", "user"},
            {"content", ojson::array({{{"type", "tool_result"}, {"tool_use_id", m.at("tool_call_id")}, {"content", m.at("content")}}})}};
  }
  if (!m.contains("tool_calls")) return {{"role", role}, {"content", m.at("content")}};
  ojson blocks = ojson::array();
  if (!m.at("content").get<std::string>().empty()) blocks.push_back({{"type", "text"}, {"text", m["content"]}});
  for (const ojson& call : m["tool_calls"]) {
    blocks.push_back({{"type", "tool_use"}, {"id", call.at("id")}, {"name", call.at("function").at("name")},
                      {"input", ojson::parse(call.at("function").at("arguments").get<std::string>())}});
  }
  return {{"role", role}, {"content", std::move(blocks)}};
}

// A translated chat body -> a Messages body that must translate back to it.
ojson messages_body_for(const ojson& chat) {
  ojson body = {{"max_tokens", chat.at("max_tokens")}};
  ojson messages = ojson::array();
  for (const ojson& m : chat.at("messages")) {
    if (m.at("role") == "system") {
      body["system"] = m.at("content");  // only ever the first message
    } else {
      messages.push_back(message_for(m));
    }
  }
  body["messages"] = std::move(messages);
  // timeout, priority and slo_ttft_ms are the server's own fields, passed through as sent.
  for (const char* name : {"temperature", "model", "top_p", "top_k", "stream", "timeout", "priority", "slo_ttft_ms"}) {
    if (chat.contains(name)) body[name] = chat[name];
  }
  if (chat.contains("stop")) body["stop_sequences"] = chat["stop"];
  if (chat.contains("tools")) {
    ojson tools = ojson::array();
    for (const ojson& t : chat["tools"]) {
      const ojson& fn = t.at("function");
      ojson tool = {{"name", fn.at("name")}, {"input_schema", fn.at("parameters")}};
      if (fn.contains("description")) tool["description"] = fn["description"];
      tools.push_back(std::move(tool));
    }
    body["tools"] = std::move(tools);
  }
  if (chat.contains("tool_choice")) {
    const ojson& c = chat["tool_choice"];
    ojson choice = c == "auto" ? ojson{{"type", "auto"}} : c == "required" ? ojson{{"type", "any"}}
                 : c == "none" ? ojson{{"type", "none"}} : ojson{{"type", "tool"}, {"name", c.at("function").at("name")}};
    if (chat.contains("parallel_tool_calls")) choice["disable_parallel_tool_use"] = !chat["parallel_tool_calls"].get<bool>();
    body["tool_choice"] = std::move(choice);
  }
  return body;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  qs::fuzz::load_qwen3();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ojson body;
  try {
    body = qs::parse_json_limited(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const qs::ApiError& e) {
    expect_anthropic_error(e);
    return 0;
  }
  qs::AnthropicRequest translated;
  try {
    translated = qs::translate_anthropic_request(body);
  } catch (const qs::ApiError& e) {
    expect_anthropic_error(e);
    qs::fuzz::expect_param_error(e, body, {"max_tokens", "messages"});
    return 0;
  }
  const ojson& chat = translated.chat_body;
  if (body.contains("stop_sequences") && !body["stop_sequences"].is_null()) {
    check(ojson(translated.stop_sequences) == body["stop_sequences"], "stop_sequences differ from the request's");
  } else {
    check(translated.stop_sequences.empty(), "stop_sequences without any in the request");
  }
  check(translated.stream == (chat.contains("stream") && chat["stream"] == true), "stream differs from the chat body's");
  qs::AnthropicRequest again;
  try {
    again = qs::translate_anthropic_request(messages_body_for(chat));
  } catch (const qs::ApiError& e) {
    qs::fuzz::fail(std::string("the written-back Messages body is refused: ") + e.what());
  }
  if (again.chat_body != chat) {
    qs::fuzz::fail("written-back Messages body translates differently:\n" + chat.dump() + "\n" + again.chat_body.dump());
  }
  qs::ChatRequest request;
  try {
    request = qs::parse_chat_request(chat, qs::fuzz::qwen3_tokenizer().vocab_size());
  } catch (const qs::ApiError& e) {
    expect_anthropic_error(e);
    return 0;
  }
  qs::fuzz::check_chat_job(request, expect_anthropic_error);
  return 0;
}
