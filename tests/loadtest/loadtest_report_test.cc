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

}  // namespace
}  // namespace qs::loadtest
