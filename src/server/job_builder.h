// Turns a validated OpenAI request into a GenerationJob: renders the chat template, tokenizes,
// fits max_tokens to the context and builds one EngineRequest per choice.
#pragma once

#include "chat/chat_template.h"
#include "server/generation_job.h"
#include "server/http_server.h"
#include "server/openai_request.h"

namespace qs {

struct JobContext {
  const ServerOptions& options;
  const Tokenizer& tokenizer;
  const ChatTemplate& chat_template;
  int64_t context_tokens;  // the engine's context length
  int32_t default_max_tokens = 0;  // > 0: replaces options.default_max_tokens (degraded service)
  // Compiles GenerationFields::structured into EngineRequest::grammar (null: such requests are a
  // 400); structured-output requests and compile times are counted in `metrics` when given.
  LazyGrammarCompiler* grammars = nullptr;
  metrics::ServerMetrics* metrics = nullptr;
};

/// The tokens that end a generation: the tokenizer's eos, <|im_end|> and <|endoftext|>.
std::vector<int32_t> default_stop_token_ids(const Tokenizer& tokenizer);

/// The model name a request's "model" field selects, as responses report it: the field itself when
/// it is the served name or one of its aliases (ServerOptions), the served name when the field is
/// absent, null or empty (as vLLM). Throws ApiError(404, type "invalid_request_error", param "model",
/// code "model_not_found": OpenAI's shape for an unknown model) for any other name, message "The
/// model `NAME` does not exist.".
std::string served_model_for(const std::string& requested, const ServerOptions& options);

/// Throws ApiError(404) for an unknown model (served_model_for), ApiError(400) when the template rejects the conversation, the prompt does not fit the
/// context, or prompt + max_tokens exceeds it (the message gives both numbers).
GenerationJob build_chat_job(const ChatRequest& request, const JobContext& ctx);
GenerationJob build_completion_job(const CompletionRequest& request, const JobContext& ctx);

/// Renders the chat template for the request's messages, tools and chat_template_kwargs, with its
/// add_generation_prompt (used by /v1/chat/completions and /tokenize). With continue_final_message
/// the prompt is cut right after the final message's content (as Hugging Face's
/// apply_chat_template), so that the model continues that message. Throws ApiError(400) when the
/// template rejects the conversation: param "messages[i].<field>" naming the message and field the
/// error follows (chat/template_error_locator.h), "messages" when none is found; or, with
/// continue_final_message, when
/// the final message has no text or the template does not reproduce it (param
/// "continue_final_message").
std::string render_chat_prompt(const JobContext& ctx, const ChatRequest& request);

}  // namespace qs
