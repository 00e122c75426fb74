#include "server/job_builder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>

#include "chat/template_error_locator.h"
#include "core/error.h"
#include "server/api_error.h"

namespace qs {
namespace {

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%s-%012llx%04llx", prefix,
                static_cast<unsigned long long>(salt & 0xffffffffffffULL),
                static_cast<unsigned long long>(counter.fetch_add(1) & 0xffff));
  return buffer;
}

// max_tokens fitted to the context: an explicit request that cannot fit is an error.
// A max_tokens above the context is a 400 (as vLLM does) even when --max-tokens-cap would have
// lowered it; the cap applies to requests that fit.
int32_t fit_max_tokens(const GenerationFields& f, int64_t n_prompt, const JobContext& ctx,
                       const char* prompt_param) {
  const int64_t context = ctx.context_tokens;
  if (n_prompt >= context) {
    throw invalid_param(prompt_param, "This model's maximum context length is " +
                                        std::to_string(context) + " tokens, but the prompt has " +
                                        std::to_string(n_prompt) + " tokens.");
  }
  int64_t fitted = 0;
  const char* bound = "";  // what bounds `fitted`, for the min_tokens error
  if (f.max_tokens) {
    const int64_t requested = *f.max_tokens;
    if (n_prompt + requested > context) {
      throw invalid_param("max_tokens", "This model's maximum context length is " +
                                            std::to_string(context) + " tokens, but " +
                                            std::to_string(n_prompt) + " prompt tokens + " +
                                            std::to_string(requested) +
                                            " max_tokens exceed it. Reduce the prompt or max_tokens.");
    }
    fitted = std::min<int64_t>(requested, ctx.options.max_tokens_cap);
    bound = "this server allows a request (--max-tokens-cap)";
  } else {
    // No max_tokens: the default (which degradation may shrink under load), raised to min_tokens
    // (vLLM's default is the whole context left), never above --max-tokens-cap nor the context left.
    const int64_t fallback = std::max<int64_t>(
        ctx.default_max_tokens > 0 ? ctx.default_max_tokens : ctx.options.default_max_tokens, f.min_tokens);
    fitted = std::min<int64_t>({fallback, ctx.options.max_tokens_cap, context - n_prompt});
    bound = "this request can have (the context left after the prompt, and --max-tokens-cap)";
  }
  if (f.min_tokens > fitted) {
    throw invalid_param("min_tokens", "min_tokens " + std::to_string(f.min_tokens) + " is more than the " +
                                          std::to_string(fitted) + " tokens " + bound);
  }
  return static_cast<int32_t>(fitted);
}

// `model`: the served name the request asked for (served_model_for).
GenerationJob base_job(const GenerationFields& f, GenerationJob::Api api, const JobContext& ctx, std::string model,
                       std::vector<int32_t> prompt_ids) {
  GenerationJob job;
  job.api = api;
  job.arrival = SteadyClock::now();
  job.id = random_id(api == GenerationJob::Api::kChat ? "chatcmpl" : "cmpl");
  job.model = std::move(model);
  job.created = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  job.stream = f.stream;
  job.include_usage = f.include_usage;
  job.include_timings = f.include_timings;
  job.priority = f.priority;
  job.slo_ttft_ms = f.slo_ttft_ms.value_or(ctx.options.slo_ttft_ms);
  job.slo_itl_ms = ctx.options.slo_itl_ms;
  job.logprobs = f.logprobs;
  job.temperature = f.sampling.temperature;
  job.top_p = f.sampling.top_p;
  job.max_tokens = fit_max_tokens(f, static_cast<int64_t>(prompt_ids.size()), ctx,
                                  api == GenerationJob::Api::kChat ? "messages" : "prompt");
  job.prompt_ids = std::move(prompt_ids);
  std::shared_ptr<const constrained::CompiledGrammar> grammar;
  if (f.structured) {
    job.structured_param = f.structured->param;
    if (ctx.grammars == nullptr) throw invalid_param(f.structured->param, "structured output is not available on this server");
    grammar = compile_structured_output(ctx.grammars->get(), *f.structured, ctx.metrics);
  }
  // Token stops, the same for every choice: the end-of-sequence tokens unless ignore_eos, then the
  // request's stop_token_ids.
  std::vector<int32_t> stop_token_ids;
  if (!f.ignore_eos) stop_token_ids = default_stop_token_ids(ctx.tokenizer);
  for (const int32_t id : f.stop_token_ids) {
    if (std::find(stop_token_ids.begin(), stop_token_ids.end(), id) == stop_token_ids.end()) stop_token_ids.push_back(id);
  }
  for (int32_t i = 0; i < f.n; ++i) {
    EngineRequest r;
    r.id = job.id + "-" + std::to_string(i);
    r.prompt_ids = job.prompt_ids;
    r.sampling = f.sampling;
    if (f.sampling.seed) r.sampling.seed = *f.sampling.seed + static_cast<uint64_t>(i);
    r.max_tokens = job.max_tokens;
    r.stop_strings = f.stop;
    r.stop_token_ids = stop_token_ids;
    r.min_tokens = f.min_tokens;
    r.ignore_eos = f.ignore_eos;
    r.grammar = grammar;
    r.top_logprobs = f.logprobs ? f.top_logprobs : -1;
    r.arrival = job.arrival;
    r.priority = f.priority;
    // The request's own timeout, never longer than the server's --request-timeout.
    const double server_timeout = ctx.options.request_timeout_s;
    r.timeout_s = f.timeout_s ? (server_timeout > 0 ? std::min(*f.timeout_s, server_timeout) : *f.timeout_s)
                              : server_timeout;
    job.choices.push_back(std::move(r));
  }
  return job;
}

}  // namespace

std::vector<int32_t> default_stop_token_ids(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  if (auto eos = tokenizer.eos_id()) ids.push_back(*eos);
  for (const char* literal : {"<|im_end|>", "<|endoftext|>"}) {
    auto id = tokenizer.token_to_id(literal);
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  }
  return ids;
}

std::string served_model_for(const std::string& requested, const ServerOptions& options) {
  if (requested.empty() || requested == options.served_model_name) return options.served_model_name;
  for (const std::string& alias : options.served_model_aliases) {
    if (requested == alias) return alias;
  }
  // The name is quoted back at most kMaxQuotedModelBytes long (a 1 MB "model" made a 1 MB error
  // body and log line); a cut name ends with "...".
  constexpr size_t kMaxQuotedModelBytes = 256;
  std::string quoted = requested;
  if (quoted.size() > kMaxQuotedModelBytes) {
    size_t cut = kMaxQuotedModelBytes;
    while (cut > 0 && (static_cast<unsigned char>(quoted[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    quoted = quoted.substr(0, cut) + "...";
  }
  throw ApiError(404, "The model `" + quoted + "` does not exist.", "model", "invalid_request_error", "model_not_found");
}

std::string render_chat_prompt(const JobContext& ctx, const ChatRequest& request) {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  for (const auto& [key, value] : request.chat_template_kwargs.items()) context[key] = value;
  context["messages"] = request.messages;
  if (!request.tools.is_null()) context["tools"] = request.tools;
  context["add_generation_prompt"] = request.add_generation_prompt;
  context["bos_token"] = "";
  context["eos_token"] = "<|im_end|>";
  std::string prompt;
  try {
    prompt = ctx.chat_template.render(context);
  } catch (const Error& e) {
    // Name the message and field the error follows (re-rendering parts of the conversation).
    if (const auto where = locate_template_error(ctx.chat_template, context, e.what())) {
      throw invalid_param(where->path, where->path + ": the chat template cannot render this conversation at this field (" +
                                           e.what() + ")");
    }
    throw invalid_param("messages", std::string("chat template: ") + e.what());
  }
  if (!request.continue_final_message) return prompt;
  // Hugging Face's rule: cut after the last occurrence of the final message's text; when the
  // template trimmed it, after the last occurrence of the trimmed text.
  const nlohmann::ordered_json& content = request.messages.back()["content"];
  const std::string final_text = content.is_string() ? content.get<std::string>() : std::string();
  const size_t first = final_text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    throw invalid_param("continue_final_message", "continue_final_message needs a final message with text to continue");
  }
  if (const size_t at = prompt.rfind(final_text); at != std::string::npos) return prompt.substr(0, at + final_text.size());
  const std::string trimmed = final_text.substr(first, final_text.find_last_not_of(" \t\r\n") + 1 - first);
  const size_t at = prompt.rfind(trimmed);
  if (at == std::string::npos) {
    throw invalid_param("continue_final_message",
                        "continue_final_message: the chat template does not reproduce the final message's text");
  }
  const std::string left_trimmed = final_text.substr(first);
  const bool keeps_trailing = prompt.compare(at, left_trimmed.size(), left_trimmed) == 0;
  return prompt.substr(0, at + (keeps_trailing ? left_trimmed.size() : trimmed.size()));
}

GenerationJob build_chat_job(const ChatRequest& request, const JobContext& ctx) {
  std::string model = served_model_for(request.fields.model, ctx.options);  // 404 before any templating
  const std::string prompt = render_chat_prompt(ctx, request);
  GenerationJob job = base_job(request.fields, GenerationJob::Api::kChat, ctx, std::move(model), ctx.tokenizer.encode(prompt));
  const bool tool_choice_none = request.tool_choice.is_string() && request.tool_choice == "none";
  job.parse_tool_calls = request.tools.is_array() && !request.tools.empty() && !tool_choice_none;
  job.split_reasoning = ctx.chat_template.source().find("<think>") != std::string::npos;
  return job;
}

GenerationJob build_completion_job(const CompletionRequest& request, const JobContext& ctx) {
  std::string model = served_model_for(request.fields.model, ctx.options);  // 404 before any tokenizing
  std::vector<int32_t> ids = request.prompt_text ? ctx.tokenizer.encode(*request.prompt_text) : request.prompt_ids;
  if (ids.empty()) throw invalid_param("prompt", "prompt must not be empty");
  GenerationJob job = base_job(request.fields, GenerationJob::Api::kCompletion, ctx, std::move(model), std::move(ids));
  job.echo = request.fields.echo;
  job.prompt_text = request.prompt_text ? *request.prompt_text : ctx.tokenizer.decode(request.prompt_ids);
  return job;
}

}  // namespace qs
