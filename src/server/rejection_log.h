// The log line of a request answered with an error before it reached the engine (400, 401, 404,
// 413, 415, 429 queue_full, 503 not ready, ...): completed and failed generations are logged by
// generation_job.cc (metrics/request_log.h); these get one line too, without token counts.
//
// JSON fields: ts (ISO 8601 UTC with milliseconds), id (null: no response id was assigned),
// request_id (the client's X-Request-Id, client_request_id(); null when none), status, method, path, error_type, error_code (the OpenAI error's "type" and "code", null when empty),
// error (its "message").
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "server/api_error.h"

namespace qs {

struct RejectedRequest {
  int status = 0;
  std::string method;
  std::string path;
  std::string error_type;  // empty: none
  std::string error_code;  // empty: none
  std::string message;
  std::string request_id;  // the client's X-Request-Id; empty: none
};

/// The rejection of `method` `path` with `error` (its status, type, code and message), for the
/// client's X-Request-Id `request_id` ("" when none).
RejectedRequest rejected_request(const ApiError& error, const std::string& method, const std::string& path,
                                 const std::string& request_id = "");

/// One JSON object on one line (no newline), stamped `at`; invalid UTF-8 becomes U+FFFD.
std::string rejection_log_line(const RejectedRequest& rejected, std::chrono::system_clock::time_point at);

/// The --log-format text line: `- status=404 method=POST path="/v1/..." type=... code=... error="..."`
/// (path and message JSON-quoted, so that a decoded path cannot start a new line), then
/// ` request_id=...` when the client sent one (visible ASCII only: nothing to quote).
std::string rejection_text_line(const RejectedRequest& rejected);

/// Writes the line of each rejected request in one --log-format: "json" (rejection_log_line),
/// "text" (rejection_text_line) or "none" (nothing). Thread-safe as far as the sink is.
class RejectionLogger {
 public:
  /// Receives one line without its newline.
  using Sink = std::function<void(const std::string& line)>;
  /// `sink` defaults to stderr, one fprintf per line (newline added).
  explicit RejectionLogger(std::string log_format, Sink sink = {});

  /// Writes the line for `error`, answered to `method` `path` (client X-Request-Id `request_id`,
  /// "" when none), stamped now.
  void log(const ApiError& error, const std::string& method, const std::string& path,
           const std::string& request_id = "") const;

 private:
  std::string log_format_;
  Sink sink_;
};

}  // namespace qs
