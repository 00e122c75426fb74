#include "server/routes/api_translation_routes.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/anthropic_api.h"
#include "server/api_error.h"
#include "server/job_builder.h"
#include "server/openai_request.h"
#include "server/responses_api.h"
#include "server/routes/http_reply.h"

namespace qs {
namespace {

class ResponsesAdapter : public ResponseAdapter {
 public:
  explicit ResponsesAdapter(nlohmann::json echo) : echo_(std::move(echo)) {}
  std::string response_id(const std::string& chat_id) const override { return qs::response_id(chat_id); }
  void on_job(const GenerationJob& job) override { translator_.emplace(job.id, job.model, job.created, echo_); }
  nlohmann::json body(const nlohmann::json& chat) override { return responses_body(chat, echo_); }
  std::string stream(const std::string& chat_sse) override { return translator_->translate(chat_sse); }

 private:
  nlohmann::json echo_;
  std::optional<ResponsesStreamTranslator> translator_;
};

class MessagesAdapter : public ResponseAdapter {
 public:
  explicit MessagesAdapter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string response_id(const std::string& chat_id) const override { return message_id(chat_id); }
  void on_job(const GenerationJob& job) override {
    translator_.emplace(job.id, job.model, static_cast<int64_t>(job.prompt_ids.size()), stops_);
  }
  nlohmann::json body(const nlohmann::json& chat) override { return anthropic_body(chat, stops_); }
  std::string stream(const std::string& chat_sse) override { return translator_->translate(chat_sse); }

 private:
  std::vector<std::string> stops_;
  std::optional<AnthropicStreamTranslator> translator_;
};

// An error the chat pipeline found at chat message i ("messages[i]..."), named by the field of the
// request that message came from (`sources`, the translator's message_params): the client sent
// no chat messages array.
ApiError in_request_terms(const ApiError& e, const std::vector<std::string>& sources) {
  const std::string& param = e.param();
  if (param.rfind("messages[", 0) != 0) return e;
  const size_t close = param.find(']');
  const std::string digits = close == std::string::npos ? "" : param.substr(9, close - 9);
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return e;
  const size_t index = std::stoul(digits);
  if (index >= sources.size()) return e;
  std::string message = e.what();
  if (message.rfind(param + ": ", 0) == 0) message.erase(0, param.size() + 2);
  return ApiError(e.status(), sources[index] + " (as chat message " + param + "): " + message, sources[index], e.type(), e.code());
}

}  // namespace

void handle_responses(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  QueueSlot slot = reserve_generation_slot(ctx);
  ResponsesRequest translated = translate_responses_request(parse_json_body(req));
  try {
    const ChatRequest request = parse_chat_request(translated.chat_body, ctx.job_context.tokenizer.vocab_size());
    run_adapted_chat(ctx, req, request, std::move(slot), std::make_shared<ResponsesAdapter>(std::move(translated.echo)), res);
  } catch (const ApiError& e) {
    throw in_request_terms(e, translated.message_params);
  }
}

void handle_messages(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  QueueSlot slot = reserve_generation_slot(ctx);
  AnthropicRequest translated = translate_anthropic_request(parse_json_body(req));
  try {
    const ChatRequest request = parse_chat_request(translated.chat_body, ctx.job_context.tokenizer.vocab_size());
    run_adapted_chat(ctx, req, request, std::move(slot), std::make_shared<MessagesAdapter>(std::move(translated.stop_sequences)), res);
  } catch (const ApiError& e) {
    throw in_request_terms(e, translated.message_params);
  }
}

void handle_count_tokens(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  nlohmann::ordered_json body = parse_json_body(req);
  if (!body.is_object()) throw body_not_an_object(body.type_name());
  // The count request has no max_tokens; the translation requires one and it does not change the
  // prompt. stream is not part of the count request either.
  body["max_tokens"] = 1;
  body.erase("stream");
  const AnthropicRequest translated = translate_anthropic_request(body);
  std::string prompt;
  try {
    const ChatRequest request = parse_chat_request(translated.chat_body, ctx.job_context.tokenizer.vocab_size());
    served_model_for(request.fields.model, ctx.options);  // 404 before any templating
    prompt = render_chat_prompt(ctx.job_context, request);
  } catch (const ApiError& e) {
    throw in_request_terms(e, translated.message_params);
  }
  send_json(res, 200, {{"input_tokens", ctx.job_context.tokenizer.encode(prompt).size()}});
}

}  // namespace qs
