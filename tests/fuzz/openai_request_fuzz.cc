// OpenAI request bodies (server/openai_request.h) end to end up to the engine: the body parser
// (parse_json_limited), parse_chat_request / parse_completion_request, and build_chat_job /
// build_completion_job with the real Qwen3 tokenizer and chat template (server/job_builder.h).
//
// Invariants:
//  - bad input only throws ApiError with a 4xx status (never another exception, never a crash);
//  - a parsed request re-serialises to a body that parses to the same fields;
//  - a built job has a rendered prompt of valid UTF-8, prompt ids inside the vocabulary,
//    1 <= max_tokens and prompt + max_tokens <= the context, and n engine requests;
//  - the body parser (a linear-time SAX builder, io/ordered_json_parser.h) agrees with
//    nlohmann::ordered_json::parse: the same value, members in the same order, where both accept
//    the text; malformed text (invalid_json) is rejected by both.
#include <cstdint>
#include <optional>
#include <string>

#include "fuzz_support.h"
#include "request_checks.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace {

using json = nlohmann::ordered_json;
using qs::fuzz::check;
using qs::fuzz::expect_client_error;

// The request's fields written back as an OpenAI body.
json fields_json(const qs::GenerationFields& f) {
  json body = json::object();
  if (!f.model.empty()) body["model"] = f.model;
  if (f.max_tokens) body["max_tokens"] = *f.max_tokens;
  const qs::SamplingParams& s = f.sampling;
  body["temperature"] = s.temperature;
  body["top_p"] = s.top_p;
  body["top_k"] = s.top_k;
  body["min_p"] = s.min_p;
  body["presence_penalty"] = s.presence_penalty;
  body["frequency_penalty"] = s.frequency_penalty;
  body["repetition_penalty"] = s.repetition_penalty;
  if (s.seed) body["seed"] = static_cast<int64_t>(*s.seed);
  if (!s.logit_bias.empty()) {
    json bias = json::object();
    for (const auto& [id, value] : s.logit_bias) bias[std::to_string(id)] = value;
    body["logit_bias"] = bias;
  }
  body["stop"] = f.stop;
  body["n"] = f.n;
  body["stream"] = f.stream;
  if (f.stream) body["stream_options"] = {{"include_usage", f.include_usage}};
  body["echo"] = f.echo;
  if (f.timeout_s) body["timeout"] = *f.timeout_s;
  return body;
}

void check_same_fields(const qs::GenerationFields& a, const qs::GenerationFields& b) {
  check(a.model == b.model && a.max_tokens == b.max_tokens && a.stop == b.stop && a.n == b.n &&
            a.stream == b.stream && a.include_usage == b.include_usage && a.echo == b.echo &&
            a.logprobs == b.logprobs && a.top_logprobs == b.top_logprobs && a.timeout_s == b.timeout_s,
        "re-serialised request differs (model/max_tokens/stop/n/stream/echo/logprobs/timeout)");
  const qs::SamplingParams& x = a.sampling;
  const qs::SamplingParams& y = b.sampling;
  check(x.temperature == y.temperature && x.top_p == y.top_p && x.top_k == y.top_k && x.min_p == y.min_p &&
            x.presence_penalty == y.presence_penalty && x.frequency_penalty == y.frequency_penalty &&
            x.repetition_penalty == y.repetition_penalty && x.seed == y.seed,
        "re-serialised request differs (sampling)");
  // Duplicate logit_bias keys collapse in JSON objects; the last one wins on both sides.
  std::map<int32_t, float> bx(x.logit_bias.begin(), x.logit_bias.end());
  std::map<int32_t, float> by(y.logit_bias.begin(), y.logit_bias.end());
  check(bx == by, "re-serialised request differs (logit_bias)");
}

void chat(const json& body) {
  qs::ChatRequest request;
  try {
    request = qs::parse_chat_request(body, qs::fuzz::qwen3_tokenizer().vocab_size());
  } catch (const qs::ApiError& e) {
    expect_client_error(e);
    return;
  }
  json again = fields_json(request.fields);
  again["logprobs"] = request.fields.logprobs;
  again["top_logprobs"] = request.fields.top_logprobs;
  again["messages"] = request.messages;
  if (!request.tools.is_null()) again["tools"] = request.tools;
  if (!request.tool_choice.is_null()) again["tool_choice"] = request.tool_choice;
  again["chat_template_kwargs"] = request.chat_template_kwargs;
  again["add_generation_prompt"] = request.add_generation_prompt;
  again["continue_final_message"] = request.continue_final_message;
  const qs::ChatRequest reparsed = qs::parse_chat_request(again, qs::fuzz::qwen3_tokenizer().vocab_size());
  check_same_fields(request.fields, reparsed.fields);
  check(reparsed.messages == request.messages && reparsed.tools == request.tools &&
            reparsed.tool_choice == request.tool_choice && reparsed.chat_template_kwargs == request.chat_template_kwargs &&
            reparsed.add_generation_prompt == request.add_generation_prompt &&
            reparsed.continue_final_message == request.continue_final_message,
        "re-serialised chat request differs (messages/tools/tool_choice/kwargs/generation prompt flags)");
  qs::fuzz::check_chat_job(request);
}

void completion(const json& body) {
  qs::CompletionRequest request;
  try {
    request = qs::parse_completion_request(body, qs::fuzz::qwen3_tokenizer().vocab_size());
  } catch (const qs::ApiError& e) {
    expect_client_error(e);
    return;
  }
  json again = fields_json(request.fields);
  if (request.fields.logprobs) again["logprobs"] = request.fields.top_logprobs;
  if (request.prompt_text) {
    again["prompt"] = *request.prompt_text;
  } else {
    again["prompt"] = request.prompt_ids;
  }
  const qs::CompletionRequest reparsed = qs::parse_completion_request(again, qs::fuzz::qwen3_tokenizer().vocab_size());
  check_same_fields(request.fields, reparsed.fields);
  check(reparsed.prompt_text == request.prompt_text && reparsed.prompt_ids == request.prompt_ids,
        "re-serialised completion request differs (prompt)");
  qs::fuzz::check_completion_job(request);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  qs::fuzz::load_qwen3();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<json> reference;
  try {
    reference = json::parse(text);
  } catch (const json::exception&) {  // parse_error, or out_of_range for a number that overflows
  }
  json body;
  try {
    body = qs::parse_json_limited(text);
  } catch (const qs::ApiError& e) {
    expect_client_error(e);
    check(e.code() != "invalid_json" || !reference, "parse_json_limited rejects JSON that nlohmann accepts");
    return 0;
  }
  check(reference.has_value() && *reference == body, "parse_json_limited differs from nlohmann::ordered_json::parse");
  chat(body);
  completion(body);
  return 0;
}
