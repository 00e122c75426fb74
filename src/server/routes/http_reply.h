// Writing JSON and OpenAI-shaped error responses into an httplib::Response, and reading a JSON
// request body: the pieces every route handler shares. None of them touches a socket.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace qs {

/// Sets `status` and the body `body` (compact JSON, invalid UTF-8 replaced by U+FFFD) with
/// Content-Type application/json.
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

/// Answers with `error`: its status, the body {"error": {"message", "type", "param", "code"}}, and
/// "Retry-After: 1" (seconds) on 429 and 503.
void send_error(httplib::Response& res, const ApiError& error);

/// A client's header value made safe to quote in an error message: a JSON string literal (in
/// double quotes) of its first `max_bytes` bytes, read as ISO-8859-1 (RFC 9110 section 5.5: field
/// values are visible ASCII plus obs-text): '"' and backslash escaped with a backslash, every other byte outside
/// 0x20..0x7e written \u00XX (so no control character and only ASCII); a longer value is cut and
/// followed by "... (N bytes)". E.g. text/"x<0x01> -> "text/\"x\u0001".
std::string quote_header_value(std::string_view value, size_t max_bytes = 64);

/// The 415 (code unsupported_media_type) for a request declaring a Content-Type other than
/// application/json (media_type.h: case-insensitive, parameters allowed), quoting the header with
/// quote_header_value; nullopt when it declares application/json or no Content-Type at all.
std::optional<ApiError> json_content_type_error(const httplib::Request& req);

/// The request body as JSON. Throws json_content_type_error's 415, 400 (code invalid_json)
/// when the body is not JSON, 400 (code json_too_deep) when it nests deeper than kMaxJsonDepth
/// (parse_json_limited in server/openai_request.h).
nlohmann::ordered_json parse_json_body(const httplib::Request& req);

}  // namespace qs
