#include "server/rejection_log.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "metrics/request_log.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

ojson or_null(const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); }

}  // namespace

RejectedRequest rejected_request(const ApiError& error, const std::string& method, const std::string& path,
                                 const std::string& request_id) {
  return {error.status(), method, path, error.type(), error.code(), error.what(), request_id};
}

std::string rejection_log_line(const RejectedRequest& rejected, std::chrono::system_clock::time_point at) {
  const ojson line = {
      {"ts", metrics::format_iso8601_utc(at)},
      {"id", nullptr},
      {"request_id", or_null(rejected.request_id)},
      {"status", rejected.status},
      {"method", rejected.method},
      {"path", rejected.path},
      {"error_type", or_null(rejected.error_type)},
      {"error_code", or_null(rejected.error_code)},
      {"error", rejected.message},
  };
  return line.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

std::string rejection_text_line(const RejectedRequest& rejected) {
  const auto quoted = [](const std::string& s) { return ojson(s).dump(-1, ' ', false, ojson::error_handler_t::replace); };
  return "- status=" + std::to_string(rejected.status) + " method=" + rejected.method + " path=" + quoted(rejected.path) +
         " type=" + (rejected.error_type.empty() ? "-" : rejected.error_type) +
         " code=" + (rejected.error_code.empty() ? "-" : rejected.error_code) + " error=" + quoted(rejected.message) +
         (rejected.request_id.empty() ? "" : " request_id=" + rejected.request_id);
}

RejectionLogger::RejectionLogger(std::string log_format, Sink sink)
    : log_format_(std::move(log_format)), sink_(std::move(sink)) {
  if (!sink_) sink_ = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
}

void RejectionLogger::log(const ApiError& error, const std::string& method, const std::string& path,
                          const std::string& request_id) const {
  if (log_format_ == "none") return;
  const RejectedRequest rejected = rejected_request(error, method, path, request_id);
  sink_(log_format_ == "text" ? rejection_text_line(rejected)
                              : rejection_log_line(rejected, std::chrono::system_clock::now()));
}

}  // namespace qs
