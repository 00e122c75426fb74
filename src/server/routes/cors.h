// Cross-origin resource sharing (WHATWG Fetch standard, "CORS protocol") for --allowed-origins:
// browsers on the listed origins may call the API and read its answers, errors included.
// Without --allowed-origins no CORS header is sent and OPTIONS is not routed (as before).
#pragma once

#include <httplib.h>

#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace qs {

/// Why `origin` is not a valid --allowed-origins entry ("" when it is): "*" (any origin) or a
/// serialized origin "scheme://host[:port]" (lower-case scheme, no path, no trailing slash), as a
/// browser sends in the Origin header.
std::string cors_origin_problem(const std::string& origin);

/// A CORS preflight, answered before routing and without authentication (a preflight carries
/// no credentials): OPTIONS with Origin and Access-Control-Request-Method, when `allowed` is
/// not empty.
bool is_cors_preflight(const httplib::Request& req, const std::vector<std::string>& allowed);

/// Answers a preflight (is_cors_preflight): 204 with Access-Control-Allow-Origin,
/// Access-Control-Allow-Methods "GET, POST, OPTIONS", Access-Control-Allow-Headers echoing
/// Access-Control-Request-Headers (Authorization needs naming: the "*" wildcard does not cover
/// it), Access-Control-Max-Age 600 (seconds) and, unless any origin is allowed, Vary: Origin. Returns ApiError 403 (code
/// cors_origin_not_allowed) for an origin not in `allowed`, leaving `res` untouched.
std::optional<ApiError> answer_cors_preflight(const httplib::Request& req, httplib::Response& res,
                                              const std::vector<std::string>& allowed);

/// Response headers a cross-origin page may read besides the CORS-safelisted ones (WHATWG Fetch):
/// the request id, why to wait, the latency breakdown (Server-Timing, issue 12) and whether the
/// answer came from the response cache or a degraded server.
inline constexpr const char* kCorsExposedHeaders =
    "x-request-id, request-id, Retry-After, Server-Timing, x-qwenserve-cache, x-qwenserve-degraded";

/// For any response to a request whose Origin is allowed: Access-Control-Allow-Origin ("*" when
/// `allowed` holds "*", else the origin itself with Vary: Origin), Access-Control-Expose-Headers
/// kCorsExposedHeaders and Timing-Allow-Origin (the same origin or "*", so that the Resource Timing
/// API shows the Server-Timing entries too). Nothing for other requests.
void add_cors_headers(const httplib::Request& req, httplib::Response& res, const std::vector<std::string>& allowed);

}  // namespace qs
