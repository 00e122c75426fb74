#include "server/routes/tokenize_routes.h"

#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/routes/http_reply.h"

namespace qs {

void handle_tokenize(const httplib::Request& req, const JobContext& ctx, httplib::Response& res) {
  const nlohmann::ordered_json body = parse_json_body(req);
  if (!body.is_object()) throw body_not_an_object(body.type_name());
  std::string text;
  if (body.contains("messages")) {
    text = render_chat_prompt(ctx, parse_chat_request(body, ctx.tokenizer.vocab_size()));
  } else if (body.contains("prompt") && body["prompt"].is_string()) {
    text = body["prompt"].get<std::string>();
  } else {
    throw invalid_param("prompt", "send a string 'prompt' or a 'messages' array");
  }
  const std::vector<int32_t> ids = ctx.tokenizer.encode(text);
  send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.context_tokens}});
}

void handle_detokenize(const httplib::Request& req, const Tokenizer& tokenizer, httplib::Response& res) {
  const nlohmann::ordered_json body = parse_json_body(req);
  if (!body.is_object()) throw body_not_an_object(body.type_name());
  if (!body.contains("tokens") || !body["tokens"].is_array()) throw invalid_param("tokens", "tokens must be an array of token ids");
  std::vector<int32_t> ids;
  for (const auto& id : body["tokens"]) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer.vocab_size()) {
      throw invalid_param("tokens", "token ids must be integers in [0, " + std::to_string(tokenizer.vocab_size()) + ")");
    }
    ids.push_back(id.get<int32_t>());
  }
  send_json(res, 200, {{"prompt", tokenizer.decode(ids)}});
}

}  // namespace qs
