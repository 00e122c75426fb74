#include "server/routes/http_reply.h"

#include <optional>
#include <string>
#include <string_view>

#include "server/openai_request.h"
#include "server/routes/media_type.h"
#include "server/routes/pre_routing.h"
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

std::string quote_header_value(std::string_view value, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < value.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {  // control character, DEL or obs-text byte (ISO-8859-1, RFC 9110 section 5.5)
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  out += '"';
  if (value.size() > max_bytes) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

std::optional<ApiError> json_content_type_error(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  if (type.empty() || is_json_media_type(type)) return std::nullopt;
  // The client's header goes into the message quoted: bounded, escaped, no raw control bytes.
  return ApiError(415, "Content-Type must be application/json, got " + quote_header_value(type), "",
                  "invalid_request_error", "unsupported_media_type");
}

nlohmann::ordered_json parse_json_body(const httplib::Request& req) {
  if (std::optional<ApiError> error = json_content_type_error(req)) throw *error;
  request_deadline::body_received();  // the body has arrived: its deadline no longer applies
  // A Content-Length body above the limit never gets here (413 from its headers); a chunked one is
  // capped on the wire with an allowance for its framing (request_deadline.h), so the decoded body
  // is held to the limit itself here.
  if (const size_t limit = request_deadline::max_body_bytes(); limit > 0 && req.body.size() > limit) {
    throw body_too_large_error(req.body.size(), limit);
  }
  return parse_json_limited(req.body);  // 400 invalid_json, or json_too_deep past kMaxJsonDepth levels
}

}  // namespace qs
