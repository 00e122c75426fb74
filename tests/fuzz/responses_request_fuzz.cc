// OpenAI Responses request bodies (POST /v1/responses, server/responses_api.h) as the route handles
// them: parse_json_limited, translate_responses_request, parse_chat_request, then the chat job with
// the real Qwen3 tokenizer and template (build_chat_job).
//
// Invariants:
//  - bad input only throws ApiError with a 4xx status; the translator's refusals are 400
//    invalid_request_error whose `param` is a path rooted at a field of the body (or `input`,
//    the required one);
//  - the chat body written back as a Responses body (responses_body_for below, the mapping of
//    responses_api.h run backwards) translates to the same chat body, key order included, and to
//    the same `stream`;
//  - the job: as openai_request_fuzz (valid UTF-8 prompt, ids in the vocabulary, fits the context).
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "request_checks.h"
#include "server/openai_request.h"
#include "server/responses_api.h"

namespace {

using ojson = nlohmann::ordered_json;
using qs::fuzz::check;

// Chat messages -> Responses input items. A tool message is a function_call_output, an assistant
// message with tool_calls is one function_call item per call (its content is always "" there), any
// other message a message item with string content. No items at all: one reasoning item, which
// the translator drops.
ojson input_items_for(const ojson& messages) {
  ojson input = ojson::array();
  for (const ojson& m : messages) {
    const std::string role = m.at("role").get<std::string>();
    if (role == "tool") {
      input.push_back({{"type", "function_call_output"}, {"call_id", m.at("tool_call_id")}, {"output", m.at("content")}});
    } else if (m.contains("tool_calls")) {
      for (const ojson& call : m.at("tool_calls")) {
        input.push_back({{"type", "function_call"}, {"call_id", call.at("id")}, {"name", call.at("function").at("name")},
                         {"arguments", call.at("function").at("arguments")}});
      }
    } else {
      input.push_back({{"type", "message"}, {"role", role}, {"content", m.at("content")}});
    }
  }
  if (input.empty()) input.push_back({{"type", "reasoning"}, {"summary", ojson::array()}});
  return input;
}

// A translated chat body -> a Responses body that must translate back to it.
ojson responses_body_for(const ojson& chat) {
  ojson body = {{"input", input_items_for(chat.at("messages"))}};
  // timeout, priority and slo_ttft_ms are the server's own fields, passed through as sent.
  for (const char* name : {"model", "temperature", "top_p", "top_k", "seed", "parallel_tool_calls", "stream", "timeout",
                           "priority", "slo_ttft_ms"}) {
    if (chat.contains(name)) body[name] = chat[name];
  }
  if (chat.contains("max_tokens")) body["max_output_tokens"] = chat["max_tokens"];
  if (chat.contains("tools")) {
    ojson tools = ojson::array();
    for (const ojson& t : chat["tools"]) {
      ojson tool = {{"type", "function"}};
      for (const auto& [key, value] : t.at("function").items()) tool[key] = value;
      tools.push_back(std::move(tool));
    }
    body["tools"] = std::move(tools);
  }
  if (chat.contains("tool_choice")) {
    const ojson& c = chat["tool_choice"];
    body["tool_choice"] = c.is_string() ? c : ojson{{"type", "function"}, {"name", c.at("function").at("name")}};
  }
  if (chat.contains("response_format")) {
    const ojson& f = chat["response_format"];
    ojson format = {{"type", f.at("type")}};
    if (f.contains("json_schema")) {
      for (const auto& [key, value] : f["json_schema"].items()) format[key] = value;
    }
    body["text"] = {{"format", format}};
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
    qs::fuzz::expect_client_error(e);
    return 0;
  }
  qs::ResponsesRequest translated;
  try {
    translated = qs::translate_responses_request(body);
  } catch (const qs::ApiError& e) {
    qs::fuzz::expect_param_error(e, body, {"input"});
    return 0;
  }
  const ojson& chat = translated.chat_body;
  check(translated.stream == (chat.contains("stream") && chat["stream"] == true), "stream differs from the chat body's");
  qs::ResponsesRequest again;
  try {
    again = qs::translate_responses_request(responses_body_for(chat));
  } catch (const qs::ApiError& e) {
    qs::fuzz::fail(std::string("the written-back Responses body is refused: ") + e.what());
  }
  if (again.chat_body != chat) {
    qs::fuzz::fail("written-back Responses body translates differently:\n" + chat.dump() + "\n" + again.chat_body.dump());
  }
  check(again.stream == translated.stream, "written-back Responses body streams differently");
  qs::ChatRequest request;
  try {
    request = qs::parse_chat_request(chat, qs::fuzz::qwen3_tokenizer().vocab_size());
  } catch (const qs::ApiError& e) {
    qs::fuzz::expect_client_error(e);
    return 0;
  }
  qs::fuzz::check_chat_job(request);
  return 0;
}
