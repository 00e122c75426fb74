// Checks made from a request's headers alone, before routing and before the body is read:
// Content-Length syntax (400), the declared length against --max-body-bytes (413), a compressed
// body (415), a POST with no length (411), and the --api-key on /v1/ routes (401).
#pragma once

#include <httplib.h>

#include <optional>

#include "server/api_error.h"
#include "server/http_server.h"

namespace qs {

/// Why a request is answered from its headers.
struct HeaderRejection {
  ApiError error;
  bool close_connection = false;  // the body is left unread, so the connection cannot be reused
};

/// True when the request declares a chunked body (Transfer-Encoding "chunked", any case, spaces
/// trimmed: RFC 9112 section 7 makes coding names case-insensitive), which cpp-httplib reads when
/// there is no Content-Length.
bool has_chunked_body(const httplib::Request& req);

/// True for a request cpp-httplib 0.11 would read a body from until the client closes (it expects
/// content for POST, PUT, PATCH, DELETE and PRI) although it declares neither Content-Length nor
/// Transfer-Encoding: without an answer from the headers it would wait for the read timeout (10 s).
bool body_read_until_close(const httplib::Request& req);

/// 413 request_too_large for a body of `bytes` above `limit` (--max-body-bytes).
ApiError body_too_large_error(unsigned long long bytes, size_t limit);

/// The rejection of `req` from its headers, or nullopt when it may be routed:
/// - both Content-Length and Transfer-Encoding (RFC 9112 section 6.1): 400 invalid_content_length,
///   connection closed;
/// - Content-Length not one decimal number (RFC 9112 section 6.3: 1*DIGIT; several must agree):
///   400 invalid_content_length, connection closed;
/// - declared length above options.max_body_bytes: 413 request_too_large, connection closed;
/// - a Content-Encoding other than identity (gzip, deflate, ...): 415 unsupported_content_encoding,
///   connection closed (a compressed body would be inflated before any size check);
/// - a Transfer-Encoding other than "chunked" (RFC 9112 section 6.1): 501
///   unsupported_transfer_encoding, connection closed;
/// - a POST with neither Content-Length nor chunked Transfer-Encoding (RFC 9110 section
///   15.5.12): 411 length_required, connection closed;
/// - options.api_key set and a /v1/ path without "Authorization: Bearer <key>" (scheme in any case)
///   or "x-api-key: <key>"
///   (Anthropic clients): 401
///   invalid_api_key (the connection stays open); a CORS preflight (cors.h) needs no key.
std::optional<HeaderRejection> check_request_headers(const httplib::Request& req, const ServerOptions& options);

}  // namespace qs
