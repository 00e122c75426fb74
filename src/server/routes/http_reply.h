// Writing JSON and OpenAI-shaped error responses into an httplib::Response, and reading a JSON
// request body: the pieces every route handler shares. None of them touches a socket.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace qs {

/// Sets `status` and the body `body` (compact JSON, invalid UTF-8 replaced by U+FFFD) with
/// Content-Type application/json.
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

/// Answers with `error`: its status, the body {"error": {"message", "type", "param", "code"}}, and
/// "Retry-After: 1" (seconds) on 429 and 503.
void send_error(httplib::Response& res, const ApiError& error);

/// The request body as JSON. Throws ApiError 415 (code unsupported_media_type) when a Content-Type
/// other than application/json is declared (none at all is accepted), 400 (code invalid_json)
/// when the body is not JSON, 400 (code json_too_deep) when it nests deeper than kMaxJsonDepth
/// (parse_json_limited in server/openai_request.h).
nlohmann::ordered_json parse_json_body(const httplib::Request& req);

}  // namespace qs
