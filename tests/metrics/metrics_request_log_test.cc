// The per-request JSON log line: one line, valid JSON, every field, ISO 8601 UTC timestamp.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/request_log.h"

namespace qs::metrics {
namespace {

using namespace std::chrono;

RequestRecord full_record() {
  RequestRecord r;
  r.id = "chatcmpl-abc123";
  r.status = 200;
  r.finish_reason = "length";
  r.prompt_tokens = 17;
  r.completion_tokens = 5;
  r.queue_ms = 1.5;
  r.ttft_ms = 42.25;
  r.itl_ms = {10.0, 20.0, 30.0, 40.0};
  r.e2e_ms = 142.25;
  r.temperature = 0.7;
  r.top_p = 0.9;
  r.max_tokens = 5;
  r.spec_draft_tokens = 8;
  r.spec_accepted_tokens = 2;
  r.request_id = "trace-7f3a";
  return r;
}

/// Matches YYYY-MM-DDTHH:MM:SS.mmmZ character by character ('d' = digit in the pattern).
bool is_iso8601_millis_utc(const std::string& ts) {
  const std::string pattern = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (ts.size() != pattern.size()) return false;
  for (size_t i = 0; i < ts.size(); ++i) {
    const bool ok = pattern[i] == 'd' ? (ts[i] >= '0' && ts[i] <= '9') : ts[i] == pattern[i];
    if (!ok) return false;
  }
  return true;
}

TEST(MetricsRequestLog, FormatsIso8601Utc) {
  EXPECT_EQ(format_iso8601_utc(system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
  const auto leap = sys_days{2024y / February / 29} + 12h + 34min + 56s + 789ms + 999us;
  EXPECT_EQ(format_iso8601_utc(leap), "2024-02-29T12:34:56.789Z");  // truncated, not rounded
  EXPECT_EQ(format_iso8601_utc(system_clock::time_point{} - 1ms), "1969-12-31T23:59:59.999Z");
  EXPECT_TRUE(is_iso8601_millis_utc(format_iso8601_utc(system_clock::now())));
  EXPECT_FALSE(is_iso8601_millis_utc("2024-02-29 12:34:56.789Z"));
}

TEST(MetricsRequestLog, LineHasEveryField) {
  const auto ts = sys_days{2025y / January / 31} + 23h + 59min + 58s + 123ms;
  const std::string line = request_log_line(full_record(), ts);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  std::set<std::string> keys;
  for (const auto& [key, value] : j.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"ts", "id", "request_id", "status", "finish_reason", "prompt_tokens",
                                         "completion_tokens", "queue_ms", "ttft_ms", "itl_ms_mean", "itl_ms_p95",
                                         "e2e_ms", "temperature", "top_p", "max_tokens", "stop_cause",
                                         "cached_tokens", "prefill_computed_tokens", "preemptions",
                                         "spec_draft_tokens", "spec_accepted_tokens", "spec_acceptance_rate",
                                         "prefill_ms", "decode_ms", "predicted_ttft_ms", "degraded"}));
  EXPECT_EQ(j["ts"], "2025-01-31T23:59:58.123Z");
  EXPECT_EQ(j["id"], "chatcmpl-abc123");
  EXPECT_EQ(j["request_id"], "trace-7f3a");
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["prompt_tokens"], 17);
  EXPECT_EQ(j["completion_tokens"], 5);
  EXPECT_EQ(j["queue_ms"], 1.5);
  EXPECT_EQ(j["ttft_ms"], 42.25);
  EXPECT_DOUBLE_EQ(j["itl_ms_mean"].get<double>(), 25.0);  // (10+20+30+40)/4
  EXPECT_DOUBLE_EQ(j["itl_ms_p95"].get<double>(), 38.5);   // h = 0.95*3 = 2.85 -> 30 + 0.85*10
  EXPECT_EQ(j["e2e_ms"], 142.25);
  EXPECT_EQ(j["temperature"], 0.7);
  EXPECT_EQ(j["top_p"], 0.9);
  EXPECT_EQ(j["max_tokens"], 5);
  EXPECT_TRUE(j["stop_cause"].is_null());  // full_record sets none
  EXPECT_EQ(j["cached_tokens"], 0);
  EXPECT_EQ(j["spec_draft_tokens"], 8);
  EXPECT_EQ(j["spec_accepted_tokens"], 2);
  EXPECT_DOUBLE_EQ(j["spec_acceptance_rate"].get<double>(), 0.25);  // 2 / 8
  EXPECT_EQ(line.rfind("{\"ts\":", 0), 0u);  // fixed field order, ts first
}

TEST(MetricsRequestLog, ErrorAndMissingValues) {
  RequestRecord r;
  r.id = "req-1";
  r.status = 400;
  r.error = "bad \"messages\"\nline two\t\x01 and invalid UTF-8 \xff";
  const std::string line = request_log_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["status"], 400);
  EXPECT_EQ(j["error"], "bad \"messages\"\nline two\t\x01 and invalid UTF-8 \xEF\xBF\xBD");
  for (const char* key : {"request_id", "finish_reason", "ttft_ms", "itl_ms_mean", "itl_ms_p95", "max_tokens", "stop_cause",
                          "spec_acceptance_rate"}) {
    EXPECT_TRUE(j[key].is_null()) << key;
  }
  EXPECT_TRUE(is_iso8601_millis_utc(j["ts"].get<std::string>())) << j["ts"];
  EXPECT_FALSE(nlohmann::json::parse(request_log_line(full_record())).contains("error"));
}

}  // namespace
}  // namespace qs::metrics
