// Log lines of rejected requests: the OpenAI error's type/code/message, no token counts, one line
// even when the decoded path holds a newline.
#include "server/rejection_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qs {
namespace {

TEST(RejectionLog, JsonLineCarriesStatusAndTheErrorButNoTokenCounts) {
  const ApiError error(404, "The model `nope` does not exist.", "model", "invalid_request_error", "model_not_found");
  const RejectedRequest r = rejected_request(error, "POST", "/v1/chat/completions");
  // 2025-01-31T23:59:58.123Z = 1738367998123 ms after the epoch.
  const std::chrono::system_clock::time_point at{std::chrono::milliseconds(1738367998123)};
  const std::string line = rejection_log_line(r, at);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["ts"], "2025-01-31T23:59:58.123Z");
  EXPECT_TRUE(j["id"].is_null());
  EXPECT_EQ(j["status"], 404);
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["path"], "/v1/chat/completions");
  EXPECT_EQ(j["error_type"], "invalid_request_error");
  EXPECT_EQ(j["error_code"], "model_not_found");
  EXPECT_EQ(j["error"], "The model `nope` does not exist.");
  for (const char* absent : {"prompt_tokens", "completion_tokens", "cached_tokens", "ttft_ms"}) {
    EXPECT_FALSE(j.contains(absent)) << absent;
  }
}

TEST(RejectionLog, EmptyTypeAndCodeAreNull) {
  const RejectedRequest r = rejected_request(ApiError(413, "HTTP 413", "", "", ""), "POST", "/x");
  const nlohmann::json j = nlohmann::json::parse(rejection_log_line(r, std::chrono::system_clock::now()));
  EXPECT_TRUE(j["error_type"].is_null());
  EXPECT_TRUE(j["error_code"].is_null());
  EXPECT_EQ(j["error"], "HTTP 413");
}

TEST(RejectionLog, TextLineQuotesPathAndMessage) {
  RejectedRequest r{429, "POST", "/v1/a\nb", "rate_limit_error", "queue_full", "server \"overloaded\"", ""};
  const std::string line = rejection_text_line(r);
  EXPECT_EQ(line, R"(- status=429 method=POST path="/v1/a\nb" type=rate_limit_error code=queue_full error="server \"overloaded\"")");
}

TEST(RejectionLog, CarriesTheClientRequestIdOrNull) {
  const ApiError error(404, "no route", "", "invalid_request_error", "not_found");
  const nlohmann::json with = nlohmann::json::parse(
      rejection_log_line(rejected_request(error, "GET", "/v1/x", "gw-7"), std::chrono::system_clock::now()));
  EXPECT_EQ(with["request_id"], "gw-7");
  EXPECT_TRUE(with["id"].is_null());
  const nlohmann::json without =
      nlohmann::json::parse(rejection_log_line(rejected_request(error, "GET", "/v1/x"), std::chrono::system_clock::now()));
  ASSERT_TRUE(without.contains("request_id"));
  EXPECT_TRUE(without["request_id"].is_null());
  const std::string text = rejection_text_line(rejected_request(error, "GET", "/v1/x", "gw-7"));
  EXPECT_EQ(text.substr(text.size() - std::string(" request_id=gw-7").size()), " request_id=gw-7");
  EXPECT_EQ(rejection_text_line(rejected_request(error, "GET", "/v1/x")).find("request_id"), std::string::npos);
}

TEST(RejectionLog, LoggerWritesOneLineInTheChosenFormatOrNone) {
  const ApiError error(429, "server overloaded", "", "rate_limit_error", "queue_full");
  std::vector<std::string> lines;
  const RejectionLogger::Sink sink = [&lines](const std::string& line) { lines.push_back(line); };

  RejectionLogger("json", sink).log(error, "POST", "/v1/completions");
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["status"], 429);
  EXPECT_EQ(j["path"], "/v1/completions");
  EXPECT_EQ(j["error_code"], "queue_full");

  RejectionLogger("text", sink).log(error, "POST", "/v1/completions");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], rejection_text_line(rejected_request(error, "POST", "/v1/completions")));

  RejectionLogger("none", sink).log(error, "POST", "/v1/completions");
  EXPECT_EQ(lines.size(), 2u) << "--log-format none writes nothing";
}

}  // namespace
}  // namespace qs
