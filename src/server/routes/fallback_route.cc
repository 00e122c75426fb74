#include "server/routes/fallback_route.h"

#include <string>

namespace qs {

std::optional<ApiError> fallback_reply(const httplib::Request& req, httplib::Response& res,
                                       const StaticFileLookup& static_files, size_t max_body_bytes) {
  if (res.status == 404 && req.method == "GET" && static_files) {
    if (const StaticFile* file = static_files(req.path)) {
      res.status = 200;
      res.set_content(std::string(file->body), std::string(file->content_type));
      return std::nullopt;
    }
  }
  const std::string message = res.status == 413   ? "request body exceeds " + std::to_string(max_body_bytes) + " bytes"
                              : res.status == 404 ? "no route for " + req.method + " " + req.path
                                                  : "HTTP error " + std::to_string(res.status);
  return ApiError(res.status, message, "", res.status == 404 ? "not_found_error" : "invalid_request_error",
                  res.status == 413 ? "request_too_large" : "");
}

}  // namespace qs
