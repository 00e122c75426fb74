#include "server/routes/pre_routing.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "server/routes/cors.h"

namespace qs {
namespace {

// `v` trimmed of spaces and tabs and lowercased (header values and coding names compare so).
std::string folded(std::string v) {
  const size_t b = v.find_first_not_of(" \t");
  const size_t e = v.find_last_not_of(" \t");
  v = b == std::string::npos ? std::string() : v.substr(b, e - b + 1);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v;
}

// cpp-httplib 0.11 reads Content-Length with strtoull, so "-5" becomes 2^64 - 5 and the request
// waits for that many bytes until the read timeout, then gets a misleading 413. Returns what is
// wrong (an invalid value, or two that disagree), or nullopt when every Content-Length is valid and
// they agree.
std::optional<std::string> invalid_content_length(const httplib::Request& req) {
  const size_t count = req.get_header_value_count("Content-Length");
  std::string first;
  for (size_t i = 0; i < count; ++i) {
    const std::string value = req.get_header_value("Content-Length", i);
    const bool digits = !value.empty() && value.size() <= 19 &&  // < 10^19 fits in 64 bits
                        value.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) {
      return "invalid Content-Length header '" + value.substr(0, 64) + "': expected one non-negative decimal number of bytes";
    }
    if (i > 0 && value != first) {
      return "conflicting Content-Length headers '" + first + "' and '" + value + "': send one length";
    }
    if (i == 0) first = value;
  }
  return std::nullopt;
}

// Every transfer coding of the request, in order, over all its Transfer-Encoding lines (RFC 9110
// 5.3: repeated lines are one comma-separated list), lowercased and trimmed; empty elements left out.
std::vector<std::string> transfer_codings(const httplib::Request& req) {
  std::vector<std::string> codings;
  const size_t count = req.get_header_value_count("Transfer-Encoding");
  for (size_t i = 0; i < count; ++i) {
    const std::string value = req.get_header_value("Transfer-Encoding", i);
    size_t start = 0;
    while (start <= value.size()) {
      size_t end = value.find(',', start);
      if (end == std::string::npos) end = value.size();
      const std::string coding = folded(value.substr(start, end - start));
      if (!coding.empty()) codings.push_back(coding);  // empty list elements are ignored (RFC 9110 5.6.1)
      start = end + 1;
    }
  }
  return codings;
}

HeaderRejection closing(ApiError error) { return {std::move(error), true}; }

}  // namespace

ApiError body_too_large_error(unsigned long long bytes, size_t limit) {
  return ApiError(413, "request body of " + std::to_string(bytes) + " bytes exceeds the limit of " + std::to_string(limit) +
                           " bytes (--max-body-bytes)",
                  "", "invalid_request_error", "request_too_large");
}

// A header's value, lowercased and trimmed of spaces and tabs; "" when absent.
static std::string normalized_header(const httplib::Request& req, const char* name) {
  return folded(req.get_header_value(name));
}

bool has_chunked_body(const httplib::Request& req) {
  const std::vector<std::string> codings = transfer_codings(req);
  return codings.size() == 1 && codings[0] == "chunked";
}

bool body_read_until_close(const httplib::Request& req) {
  const std::string& m = req.method;
  return (m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE" || m == "PRI") &&
         !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding");
}

// The Content-Encoding of the body, lowercased and trimmed; "" when absent.
static std::string content_encoding(const httplib::Request& req) { return normalized_header(req, "Content-Encoding"); }

// "Authorization: Bearer <key>" with the scheme in any case (RFC 9110 section 11.1).
static bool bearer_matches(const std::string& authorization, const std::string& key) {
  constexpr size_t kScheme = 7;  // "bearer "
  if (authorization.size() != kScheme + key.size()) return false;
  std::string scheme = authorization.substr(0, kScheme);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme == "bearer " && authorization.compare(kScheme, std::string::npos, key) == 0;
}

std::optional<HeaderRejection> check_request_headers(const httplib::Request& req, const ServerOptions& options) {
  // RFC 9112 section 6.1: a request with both may be rejected, and the connection must be closed
  // after the response either way (the two framings disagree: request smuggling).
  if (req.has_header("Content-Length") && req.has_header("Transfer-Encoding")) {
    return closing(ApiError(400, "a request may not carry both Content-Length and Transfer-Encoding", "",
                            "invalid_request_error", "invalid_content_length"));
  }
  if (const std::optional<std::string> problem = invalid_content_length(req)) {
    return closing(ApiError(400, *problem, "", "invalid_request_error", "invalid_content_length"));
  }
  // A compressed body would be inflated by cpp-httplib before any size check (a 1 MB gzip upload can
  // decode to 1 GB of memory); bodies are accepted as sent only, as OpenAI's and Anthropic's APIs
  // document them (RFC 9110 section 15.5.16: 415 for an unsupported content coding).
  if (const std::string coding = content_encoding(req); !coding.empty() && coding != "identity") {
    return closing(ApiError(415, "Content-Encoding '" + req.get_header_value("Content-Encoding").substr(0, 64) +
                                     "' is not supported: send the request body uncompressed",
                            "", "invalid_request_error", "unsupported_content_encoding"));
  }
  // RFC 9112 section 6.1: a transfer coding the server does not understand is a 501. cpp-httplib
  // decodes "chunked" alone (any case); "gzip, chunked" would be read as if it had no framing.
  if (const std::vector<std::string> codings = transfer_codings(req);
      codings.size() > 1 && std::all_of(codings.begin(), codings.end(), [](const std::string& c) { return c == "chunked"; })) {
    // RFC 9112 section 6.1: chunked is never applied more than once (one line or several).
    return closing(ApiError(400, "Transfer-Encoding applies 'chunked' more than once", "", "invalid_request_error",
                            "invalid_transfer_encoding"));
  }
  if (req.has_header("Transfer-Encoding") && !has_chunked_body(req)) {
    return closing(ApiError(501, "Transfer-Encoding '" + req.get_header_value("Transfer-Encoding").substr(0, 64) +
                                     "' is not supported: send a Content-Length or 'Transfer-Encoding: chunked'",
                            "", "invalid_request_error", "unsupported_transfer_encoding"));
  }
  // Decided before httplib reads (or waits for) the body: a declared length above the limit gets
  // 413 at once instead of after the read timeout, and a POST whose body would end only when the
  // client closes gets 411. (POST is the only method a route here takes a body with; a PUT, PATCH
  // or DELETE read until close is answered 404 / 405 from the route table by the caller.)
  if (req.has_header("Content-Length")) {
    const unsigned long long declared = std::stoull(req.get_header_value("Content-Length"));  // validated above
    if (declared > options.max_body_bytes) {
      return closing(body_too_large_error(declared, options.max_body_bytes));
    }
  } else if (req.method == "POST" && body_read_until_close(req)) {
    return closing(ApiError(411, "a POST needs a Content-Length header (or chunked transfer encoding)", "",
                            "invalid_request_error", "length_required"));
  }
  if (!options.api_key.empty() && req.path.rfind("/v1/", 0) == 0 && !is_cors_preflight(req, options.allowed_origins) &&
      !bearer_matches(req.get_header_value("Authorization"), options.api_key) &&
      req.get_header_value("x-api-key") != options.api_key) {  // Anthropic clients send x-api-key
    return HeaderRejection{ApiError(401, "Incorrect or missing API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')", "",
                                    "invalid_request_error", "invalid_api_key"),
                           false};
  }
  return std::nullopt;
}

}  // namespace qs
