// What a request gets when no route answered it and httplib is about to send a bare error status:
// a static file (the web UI) for a GET the lookup knows, else an OpenAI-shaped error.
#pragma once

#include <httplib.h>

#include <optional>

#include "server/api_error.h"
#include "server/http_server.h"

namespace qs {

/// For `res` carrying httplib's error status and no body (404: no route, 413: body over
/// `max_body_bytes` while reading, 400: unreadable request, ...): a GET 404 for a path
/// `static_files` knows is answered with that file (status 200; returns nullopt). A 400 for a
/// multipart/form-data body (which httplib parses itself, before routing, and refuses when it is
/// not valid multipart, e.g. JSON sent with that type) becomes the 415 the route would answer
/// (json_content_type_error in http_reply.h). Otherwise
/// returns the error to answer with, of status res.status: 404 type not_found_error
/// ("no route for METHOD PATH"), 413 code request_too_large, others "HTTP error N".
std::optional<ApiError> fallback_reply(const httplib::Request& req, httplib::Response& res,
                                       const StaticFileLookup& static_files, size_t max_body_bytes);

}  // namespace qs
