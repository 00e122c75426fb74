// POST /v1/responses (OpenAI Responses API) and POST /v1/messages (Anthropic Messages API): each
// request is translated into a chat request (responses_api.h, anthropic_api.h), run through the
// chat pipeline (run_adapted_chat) and answered in its API's shape.
#pragma once

#include <httplib.h>

#include "server/routes/generation_routes.h"

namespace qs {

/// POST /v1/responses. Admission as /v1/chat/completions (503 / 429), then
/// translate_responses_request and parse_chat_request (400, OpenAI error shape), then a
/// `response` object or, with "stream": true, the Responses event stream.
void handle_responses(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res);

/// POST /v1/messages. As handle_responses with translate_anthropic_request and a `message` object
/// or the Messages event stream. Errors are thrown as ApiError; the server answers them on this
/// path in Anthropic's shape (anthropic_error_json).
void handle_messages(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res);

/// POST /v1/messages/count_tokens (Anthropic's "Count Message tokens"): the body of a Messages
/// request without max_tokens (`model`, `system`, `messages`, `tools`, `tool_choice`; a max_tokens
/// or stream sent anyway is ignored) -> 200 {"input_tokens": N}, N the prompt tokens /v1/messages
/// would bill for the same body (its usage.input_tokens: the chat template rendered with the tools,
/// then encoded). Takes no queue slot and runs nothing on the engine. Throws ApiError 400 as
/// /v1/messages does for the fields it shares, 404 model_not_found for an unknown model; answered
/// in Anthropic's shape.
void handle_count_tokens(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace qs
