#include "request_checks.h"

#include "fuzz_support.h"

namespace qs::fuzz {
namespace {

void check_job(const GenerationJob& job, const GenerationFields& f) {
  const Tokenizer& tok = qwen3_tokenizer();
  check(!job.prompt_ids.empty(), "job with an empty prompt");
  for (int32_t id : job.prompt_ids) check(id >= 0 && id < tok.vocab_size(), "prompt id outside the vocabulary");
  check(job.max_tokens >= 1 && static_cast<int64_t>(job.prompt_ids.size()) + job.max_tokens <= kFuzzContextTokens,
        "max_tokens does not fit the context");
  check(static_cast<int32_t>(job.choices.size()) == f.n, "job has a choice count other than n");
  check(is_valid_utf8(job.prompt_text) || job.api == GenerationJob::Api::kChat, "completion prompt_text is not valid UTF-8");
}

// "a[3].b" -> "a"; "a.b" -> "a".
std::string param_root(const std::string& param) { return param.substr(0, param.find_first_of(".[")); }

}  // namespace

JobContext fuzz_job_context() {
  static const ServerOptions options;
  return JobContext{options, qwen3_tokenizer(), qwen3_chat_template(), kFuzzContextTokens};
}

void expect_client_error(const ApiError& e) {
  check(e.status() >= 400 && e.status() < 500, "status " + std::to_string(e.status()) + ": " + e.what());
  check(*e.what() != '\0', "error without a message");
  try {
    (void)e.to_json().dump();
  } catch (const nlohmann::json::exception& x) {
    fail(std::string("error body does not serialise: ") + x.what());
  }
}

void expect_param_error(const ApiError& e, const nlohmann::ordered_json& body,
                        std::initializer_list<const char*> required) {
  expect_client_error(e);
  check(e.status() == 400 && e.type() == "invalid_request_error",
        "translation error is not a 400 invalid_request_error: " + std::to_string(e.status()) + " " + e.type());
  if (!body.is_object()) return;  // "request body must be a JSON object" names no field
  const std::string root = param_root(e.param());
  bool known = body.contains(root);
  for (const char* name : required) known = known || root == name;
  check(known, "error param '" + e.param() + "' names no field of the request: " + e.what());
}

void check_chat_job(const ChatRequest& request, void (*on_error)(const ApiError&)) {
  const JobContext ctx = fuzz_job_context();
  try {
    const std::string prompt = render_chat_prompt(ctx, request);
    check(is_valid_utf8(prompt), "rendered chat prompt is not valid UTF-8");
    check_job(build_chat_job(request, ctx), request.fields);
  } catch (const ApiError& e) {
    on_error(e);
  }
}

void check_completion_job(const CompletionRequest& request) {
  try {
    check_job(build_completion_job(request, fuzz_job_context()), request.fields);
  } catch (const ApiError& e) {
    expect_client_error(e);
  }
}

}  // namespace qs::fuzz
