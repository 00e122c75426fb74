// Checks shared by the request-body fuzz targets (OpenAI chat / completions, Responses, Anthropic
// Messages, chat_template_kwargs): what a refused request must look like, and what a built job
// must satisfy, with the real Qwen3 tokenizer and chat template.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "server/api_error.h"
#include "server/job_builder.h"
#include "server/openai_request.h"

namespace qs::fuzz {

/// The engine context length the jobs are built for (tokens).
inline constexpr int64_t kFuzzContextTokens = 2048;

/// Default ServerOptions with the Qwen3 tokenizer and chat template, kFuzzContextTokens.
JobContext fuzz_job_context();

/// A refusal of client input: 4xx status, non-empty message, and an OpenAI error body that
/// serialises (valid UTF-8 throughout). Fails the run otherwise.
void expect_client_error(const ApiError& e);

/// A 400 invalid_request_error whose `param` names a field path ("a", "a[3].b", "a.b") rooted at a
/// top-level key of `body` or at one of `required` (fields whose absence is the error).
void expect_param_error(const ApiError& e, const nlohmann::ordered_json& body,
                        std::initializer_list<const char*> required);

/// Renders and builds the chat job of a parsed request; a refusal goes to `on_error` (default:
/// expect_client_error). A built job has a valid UTF-8 prompt, prompt ids in the vocabulary,
/// 1 <= max_tokens and prompt + max_tokens within the context, and n choices.
void check_chat_job(const ChatRequest& request, void (*on_error)(const ApiError&) = expect_client_error);

/// The same job checks for a completion request.
void check_completion_job(const CompletionRequest& request);

}  // namespace qs::fuzz
