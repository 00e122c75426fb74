#include "server/routes/pre_routing.h"

#include <string>

#include "server/routes/cors.h"

namespace qs {
namespace {

// cpp-httplib 0.11 reads Content-Length with strtoull, so "-5" becomes 2^64 - 5 and the request
// waits for that many bytes until the read timeout, then gets a misleading 413. Returns the
// offending value, or nullopt when every Content-Length is valid and they agree.
std::optional<std::string> invalid_content_length(const httplib::Request& req) {
  const size_t count = req.get_header_value_count("Content-Length");
  std::string first;
  for (size_t i = 0; i < count; ++i) {
    const std::string value = req.get_header_value("Content-Length", i);
    const bool digits = !value.empty() && value.size() <= 19 &&  // < 10^19 fits in 64 bits
                        value.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (i > 0 && value != first)) return value;
    if (i == 0) first = value;
  }
  return std::nullopt;
}

HeaderRejection closing(ApiError error) { return {std::move(error), true}; }

}  // namespace

ApiError body_too_large_error(unsigned long long bytes, size_t limit) {
  return ApiError(413, "request body of " + std::to_string(bytes) + " bytes exceeds the limit of " + std::to_string(limit) +
                           " bytes (--max-body-bytes)",
                  "", "invalid_request_error", "request_too_large");
}

bool has_chunked_body(const httplib::Request& req) {
  return req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
}

std::optional<HeaderRejection> check_request_headers(const httplib::Request& req, const ServerOptions& options) {
  // RFC 9112 section 6.1: a request with both may be rejected, and the connection must be closed
  // after the response either way (the two framings disagree: request smuggling).
  if (req.has_header("Content-Length") && req.has_header("Transfer-Encoding")) {
    return closing(ApiError(400, "a request may not carry both Content-Length and Transfer-Encoding", "",
                            "invalid_request_error", "invalid_content_length"));
  }
  if (const std::optional<std::string> length = invalid_content_length(req)) {
    return closing(ApiError(400, "invalid Content-Length header '" + *length +
                                     "': expected one non-negative decimal number of bytes",
                            "", "invalid_request_error", "invalid_content_length"));
  }
  // Decided before httplib reads (or waits for) the body: a declared length above the limit gets
  // 413 at once instead of after the read timeout, and a POST whose body would end only when the
  // client closes gets 411.
  if (req.has_header("Content-Length")) {
    const unsigned long long declared = std::stoull(req.get_header_value("Content-Length"));  // validated above
    if (declared > options.max_body_bytes) {
      return closing(body_too_large_error(declared, options.max_body_bytes));
    }
  } else if (req.method == "POST" && !has_chunked_body(req)) {
    return closing(ApiError(411, "a POST needs a Content-Length header (or chunked transfer encoding)", "",
                            "invalid_request_error", "length_required"));
  }
  if (!options.api_key.empty() && req.path.rfind("/v1/", 0) == 0 && !is_cors_preflight(req, options.allowed_origins) &&
      req.get_header_value("Authorization") != "Bearer " + options.api_key &&
      req.get_header_value("x-api-key") != options.api_key) {  // Anthropic clients send x-api-key
    return HeaderRejection{ApiError(401, "Incorrect or missing API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')", "",
                                    "invalid_request_error", "invalid_api_key"),
                           false};
  }
  return std::nullopt;
}

}  // namespace qs
