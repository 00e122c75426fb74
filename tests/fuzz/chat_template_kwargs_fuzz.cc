// chat_template_kwargs (a vLLM extension of /v1/chat/completions, server/openai_request.h): the
// input is the kwargs JSON, sent with a fixed conversation (system, user, an assistant turn with
// reasoning and a tool call, the tool's result, user) and one tool through parse_chat_request and
// render_chat_prompt with the real Qwen3 chat template, then the job (build_chat_job).
//
// Invariants:
//  - bad input only throws ApiError with a 4xx status;
//  - the prompt is valid UTF-8;
//  - kwargs whose names all do not occur in the template's source leave the prompt as it is without
//    kwargs (a template cannot read a variable it never names);
//  - given enable_thinking, the prompt ends with Qwen3's empty think block "<think>\n\n</think>\n\n"
//    exactly when the value is the boolean false (the template's `enable_thinking is false`;
//    Jinja's `false` test is `value is False`, so 0, "false" and null do not count).
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "request_checks.h"
#include "server/openai_request.h"

namespace {

using ojson = nlohmann::ordered_json;
using qs::fuzz::check;

const char* const kConversation = R"({"messages": [
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
   "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
  {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
  {"role": "user", "content": "Thanks!"}],
 "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})";

ojson request_body(const ojson& kwargs) {
  ojson body = ojson::parse(kConversation);
  body["chat_template_kwargs"] = kwargs;
  return body;
}

const std::string& prompt_without_kwargs() {
  static const std::string prompt = [] {
    const qs::ChatRequest request = qs::parse_chat_request(ojson::parse(kConversation), qs::fuzz::qwen3_tokenizer().vocab_size());
    return qs::render_chat_prompt(qs::fuzz::fuzz_job_context(), request);
  }();
  return prompt;
}

bool names_only_unknown_variables(const ojson& kwargs) {
  const std::string& source = qs::fuzz::qwen3_chat_template().source();
  for (const auto& [key, value] : kwargs.items()) {
    if (source.find(key) != std::string::npos) return false;
  }
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  qs::fuzz::load_qwen3();
  (void)prompt_without_kwargs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ojson kwargs;
  try {
    kwargs = qs::parse_json_limited(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const qs::ApiError& e) {
    qs::fuzz::expect_client_error(e);
    return 0;
  }
  qs::ChatRequest request;
  try {
    request = qs::parse_chat_request(request_body(kwargs), qs::fuzz::qwen3_tokenizer().vocab_size());
  } catch (const qs::ApiError& e) {
    qs::fuzz::expect_client_error(e);
    return 0;
  }
  check(kwargs.is_null() ? request.chat_template_kwargs.empty() : request.chat_template_kwargs == kwargs,
        "chat_template_kwargs differ from the request's");  // null: absent
  std::string prompt;
  try {
    prompt = qs::render_chat_prompt(qs::fuzz::fuzz_job_context(), request);
  } catch (const qs::ApiError& e) {
    qs::fuzz::expect_client_error(e);
    return 0;
  }
  check(qs::fuzz::is_valid_utf8(prompt), "rendered prompt is not valid UTF-8");
  if (names_only_unknown_variables(kwargs)) {
    check(prompt == prompt_without_kwargs(), "kwargs the template never names changed the prompt");
  }
  if (kwargs.contains("enable_thinking")) {
    const bool is_false = kwargs["enable_thinking"].is_boolean() && !kwargs["enable_thinking"].get<bool>();
    check(ends_with(prompt, "<think>\n\n</think>\n\n") == is_false,
          "empty think block " + std::string(is_false ? "missing" : "present") + " with enable_thinking " +
              kwargs["enable_thinking"].dump());
  }
  qs::fuzz::check_chat_job(request);
  return 0;
}
