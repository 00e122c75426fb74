// OpenAI-shaped API errors: {"error": {"message", "type", "param", "code"}} with an HTTP status.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace qs {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {},
           std::string type = "invalid_request_error", std::string code = {})
      : std::runtime_error(message),
        status_(status),
        param_(std::move(param)),
        type_(std::move(type)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }
  /// Seconds for the Retry-After header of a 429 / 503 (default 1).
  int retry_after_s() const { return retry_after_s_; }
  ApiError& with_retry_after(int seconds) {
    retry_after_s_ = seconds < 1 ? 1 : seconds;
    return *this;
  }

  nlohmann::json to_json() const {
    return {{"error",
             {{"message", what()},
              {"type", type_},
              {"param", param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_)},
              {"code", code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_)}}}};
  }

 private:
  int status_;
  std::string param_;
  std::string type_;
  std::string code_;
  int retry_after_s_ = 1;
};

/// 400 invalid_request_error naming the offending parameter.
inline ApiError invalid_param(const std::string& param, const std::string& message) {
  return ApiError(400, message, param, "invalid_request_error", "invalid_value");
}

/// 400 invalid_request_error, code "invalid_body", for a body that is valid JSON but not the JSON
/// object every route expects (`null`, `[]`, a number, ...); `type_name` is the JSON type it is.
inline ApiError body_not_an_object(const std::string& type_name) {
  return ApiError(400, "request body must be a JSON object, got " + type_name, "", "invalid_request_error",
                  "invalid_body");
}

}  // namespace qs
