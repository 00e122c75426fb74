#include "server/routes/fallback_route.h"

#include <string>
#include <string_view>
#include <vector>

#include "server/routes/http_reply.h"
#include "server/routes/pre_routing.h"

namespace qs {
namespace {

// The methods cpp-httplib 0.11 parses; any other request line it answers with a bare 400.
bool httplib_method(const std::string& m) {
  for (const char* known : {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"}) {
    if (m == known) return true;
  }
  return false;
}

// RFC 9110 section 5.6.2: a method is a token.
bool is_token(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace

std::optional<ApiError> fallback_reply(const httplib::Request& req, httplib::Response& res,
                                       const StaticFileLookup& static_files, size_t max_body_bytes,
                                       const RouteMethods& routes) {
  if (res.status == 404 && req.method == "GET" && static_files) {
    if (const StaticFile* file = static_files(req.path)) {
      res.status = 200;
      res.set_content(std::string(file->body), std::string(file->content_type));
      return std::nullopt;
    }
  }
  // httplib reads a multipart/form-data body itself before routing and answers 400 when it cannot
  // parse it (e.g. JSON sent with that type): what the route would have answered is 415.
  if (res.status == 400 && req.is_multipart_form_data()) {
    if (std::optional<ApiError> unsupported = json_content_type_error(req)) {
      res.status = 415;
      return unsupported;
    }
  }
  if (res.status == 404) {
    if (const std::vector<std::string> allowed = routes.allowed(req.path); !allowed.empty()) {
      res.status = 405;
      res.set_header("Allow", allow_header_value(allowed));
      return ApiError(405, "method " + req.method + " is not allowed for " + req.path + " (allowed: " +
                               allow_header_value(allowed) + ")",
                      "", "invalid_request_error", "method_not_allowed");
    }
  }
  // httplib answers 400 when a body stops short of its Content-Length: the client stopped sending
  // (its read timed out) or left. What the client is owed is 408 (RFC 9110 section 15.5.9).
  if (res.status == 400 && req.has_header("Content-Length")) {
    const std::string declared = req.get_header_value("Content-Length");  // digits (pre-routing checked)
    if (req.body.size() < std::stoull(declared)) {
      res.status = 408;
      res.set_header("Connection", "close");  // the rest of the body may still come: no next request
      return ApiError(408, "request body incomplete: " + std::to_string(req.body.size()) + " of " + declared +
                               " bytes arrived (the client stopped sending, or closed)",
                      "", "invalid_request_error", "request_timeout");
    }
  }
  if (res.status == 400 && has_chunked_body(req)) {
    res.set_header("Connection", "close");
    return ApiError(400, "the chunked request body could not be read (malformed chunk framing, or the client "
                         "stopped sending)", "", "invalid_request_error", "invalid_body");
  }
  // A head cpp-httplib could not parse: the connection's framing is lost, so it is closed. A
  // well-formed request line with a method nobody here implements is a 501 (RFC 9110 section 9.1).
  const bool not_served = req.method == "TRACE" || req.method == "CONNECT";  // parsed, but no route takes them
  if (res.status == 400 && (!httplib_method(req.method) || not_served)) {
    res.set_header("Connection", "close");
    if (is_token(req.method) && (req.version == "HTTP/1.1" || req.version == "HTTP/1.0")) {
      res.status = 501;
      return ApiError(501, "method " + req.method.substr(0, 32) + " is not implemented", "", "invalid_request_error",
                      "method_not_implemented");
    }
    return ApiError(400, "malformed request line: expected 'METHOD /path HTTP/1.1' ending in CRLF", "",
                    "invalid_request_error", "malformed_request");
  }
  // Every other 400 without a body is httplib's own for a head it could not parse (handlers always
  // answer with a body; the unreadable bodies are named above).
  if (res.status == 400) {
    res.set_header("Connection", "close");
    return ApiError(400, "malformed request head: the request line or a header field could not be parsed "
                         "(HTTP/1.1 or HTTP/1.0, 'Name: value' header lines, each ending in CRLF)",
                    "", "invalid_request_error", "malformed_request");
  }
  const std::string message = res.status == 413   ? "request body exceeds " + std::to_string(max_body_bytes) + " bytes"
                              : res.status == 404 ? "no route for " + req.method + " " + req.path
                                                  : "HTTP error " + std::to_string(res.status);
  // OpenAI's shape for an unknown URL: invalid_request_error (Anthropic's not_found_error is given by
  // anthropic_error_json on its routes).
  return ApiError(res.status, message, "", "invalid_request_error",
                  res.status == 413 ? "request_too_large" : res.status == 404 ? "not_found" : "");
}

}  // namespace qs
