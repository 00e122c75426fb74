// What a request gets when no route answered it and httplib is about to send a bare error status:
// a static file (the web UI) for a GET the lookup knows, 405 for a route's path with another
// method, else an OpenAI-shaped error.
#pragma once

#include <httplib.h>

#include <optional>

#include "server/api_error.h"
#include "server/http_server.h"
#include "server/routes/route_methods.h"

namespace qs {

/// For `res` carrying httplib's error status and no body (404: no route, 413: body over
/// `max_body_bytes` while reading, 400: unreadable request, ...): a GET 404 for a path
/// `static_files` knows is answered with that file (status 200; returns nullopt). A 400 for a
/// multipart/form-data body (which httplib parses itself, before routing, and refuses when it is
/// not valid multipart, e.g. JSON sent with that type) becomes the 415 the route would answer
/// (json_content_type_error in http_reply.h). A 404 for a
/// path `routes` answers with other methods becomes 405 (RFC 9110 section 15.5.6): res.status
/// 405, an Allow header listing them, and an error of type invalid_request_error, code
/// method_not_allowed. A 400 for a body shorter than its Content-Length (the read timed out or the
/// client left) becomes 408 code request_timeout; a 400 for a chunked body says so (code
/// invalid_body). Otherwise returns the error to answer with, of status res.status: 404
/// type not_found_error ("no route for METHOD PATH"), 413 code request_too_large, others
/// "HTTP error N".
std::optional<ApiError> fallback_reply(const httplib::Request& req, httplib::Response& res,
                                       const StaticFileLookup& static_files, size_t max_body_bytes,
                                       const RouteMethods& routes = RouteMethods{});

}  // namespace qs
