#include "server/routes/http_reply.h"

#include <string>

#include "server/openai_request.h"
#include "server/request_deadline.h"

namespace qs {

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error.status(), error.to_json());
  if (error.status() == 429 || error.status() == 503) {
    res.set_header("Retry-After", std::to_string(error.retry_after_s()));  // seconds
  }
}

nlohmann::ordered_json parse_json_body(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  if (!type.empty() && type.rfind("application/json", 0) != 0) {
    throw ApiError(415, "Content-Type must be application/json, got " + type, "", "invalid_request_error",
                   "unsupported_media_type");
  }
  request_deadline::body_received();  // the body has arrived: its deadline no longer applies
  return parse_json_limited(req.body);  // 400 invalid_json, or json_too_deep past kMaxJsonDepth levels
}

}  // namespace qs
