// The human table of a loadtest level (format_level): a level where every request failed has no
// latency statistics and must say so instead of printing a table of "nan" (issue 16).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "loadtest/report.h"

namespace qs::loadtest {
namespace {

RequestRecord failed(const std::string& status) {
  RequestRecord r;
  r.status = status;
  r.error = "could not connect";
  r.ttft_ms = std::nan("");
  r.e2e_ms = std::nan("");
  return r;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

TEST(LoadtestReport, EveryRequestFailedPrintsNoNanTable) {
  LevelResult level;
  level.level = 1;
  level.duration_s = 0;
  level.records = {failed("connect"), failed("connect"), failed("503")};
  const std::string text = format_level(level_json(level, {}));
  EXPECT_EQ(lower(text).find("nan"), std::string::npos) << text;
  EXPECT_NE(text.find("no request completed"), std::string::npos) << text;
  EXPECT_NE(text.find("completed 0/3"), std::string::npos) << text;
  EXPECT_NE(text.find("\"connect\":2"), std::string::npos) << text;
}

TEST(LoadtestReport, OneCompletedRequestStillGetsItsTable) {
  LevelResult level;
  level.level = 1;
  level.duration_s = 1;
  RequestRecord ok;
  ok.status = "200";
  ok.ttft_ms = 10;
  ok.e2e_ms = 30;
  ok.itl_ms = {20};
  ok.output_tokens = 2;
  ok.content_chunks = 2;
  level.records = {ok, failed("connect")};
  const std::string text = format_level(level_json(level, {}));
  EXPECT_EQ(lower(text).find("nan"), std::string::npos) << text;
  // One sample: every statistic is the sample itself.
  EXPECT_NE(text.find("e2e_ms             30.00     30.00     30.00     30.00     30.00     30.00"), std::string::npos) << text;
}

// The closing-note figures of the SLO sweep come out of one level: SLO attainment over all sent
// requests, 429 share, and the prediction error in ms and relative to the prediction.
TEST(LoadtestReport, SloFiguresAndPredictionError) {
  LevelResult level;
  level.level = 2;
  level.duration_s = 10;
  // Measured (queue + prefill) vs predicted: 100 vs 100 (0), 150 vs 100 (+0.5), 90 vs 120
  // (-0.25), 200 vs 100 (+1.0).
  const double measured[4] = {100, 150, 90, 200}, predicted[4] = {100, 100, 120, 100};
  for (int i = 0; i < 4; ++i) {
    RequestRecord r;
    r.status = "200";
    r.ttft_ms = measured[i] + 1;
    r.e2e_ms = 500;
    r.output_tokens = 1;
    r.server_queue_ms = measured[i] - 40;
    r.server_prefill_ms = 40;
    r.server_decode_ms = 10;
    r.server_predicted_ttft_ms = predicted[i];
    level.records.push_back(r);
  }
  RequestRecord rejected = failed("429");
  rejected.e2e_ms = 3;
  level.records.push_back(rejected);
  SloOptions slo;
  slo.ttft_ms = 120;  // met by the first (101 ms) and third (91 ms)
  const nlohmann::ordered_json j = level_json(level, slo);
  EXPECT_DOUBLE_EQ(j["goodput"].get<double>(), 0.2);         // 2 good / 10 s
  EXPECT_DOUBLE_EQ(j["slo_attainment"].get<double>(), 0.4);  // 2 of 5 sent
  EXPECT_DOUBLE_EQ(j["rejected_429_share"].get<double>(), 0.2);
  // Sorted relative errors -0.25, 0, 0.5, 1.0; numpy linear percentiles: p10 at rank 0.3, p50 at
  // 1.5, p90 at 2.7.
  const auto& rel = j["ttft_prediction_error_rel"];
  EXPECT_NEAR(rel["p10"].get<double>(), -0.25 + 0.3 * 0.25, 1e-12);
  EXPECT_NEAR(rel["p50"].get<double>(), 0.25, 1e-12);
  EXPECT_NEAR(rel["p90"].get<double>(), 0.5 + 0.7 * 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(rel["within_25pct"].get<double>(), 0.5);  // 0 and -0.25
  EXPECT_NEAR(j["ttft_prediction_error_ms"]["p50"].get<double>(), 25.0, 1e-12);  // errors -30, 0, 50, 100
  const std::string text = format_level(j);
  EXPECT_NE(text.find("slo attainment 0.400   429 share 0.200"), std::string::npos) << text;
  EXPECT_NE(text.find("within +-25%: 0.500"), std::string::npos) << text;
}

}  // namespace
}  // namespace qs::loadtest
