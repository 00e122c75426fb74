// Summary statistics (src/loadtest/statistics.h) and report aggregation (report.h) against
// references computed here by other routes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "loadtest/report.h"
#include "loadtest/statistics.h"

namespace qs::loadtest {
namespace {

// Hyndman & Fan type 7 written as a weighted sum in long double, with the rank computed from the
// integer numerator q * (n - 1) so floor() sees an exact value: (1 - g) * x[j] + g * x[j + 1].
long double reference_percentile(std::vector<double> x, int q) {
  std::sort(x.begin(), x.end());
  const long long n = static_cast<long long>(x.size());
  const long long num = static_cast<long long>(q) * (n - 1);  // rank = num / 100
  const long long j = num / 100;
  const long double g = static_cast<long double>(num % 100) / 100.0L;
  if (j + 1 >= n) return x[static_cast<size_t>(j)];
  return (1.0L - g) * x[static_cast<size_t>(j)] + g * x[static_cast<size_t>(j + 1)];
}

void expect_close(double got, long double want, const std::string& what) {
  const long double tol = 1e-12L * std::max(1.0L, std::fabs(want));
  EXPECT_LE(std::fabs(static_cast<long double>(got) - want), tol) << what << ": got " << got
                                                                  << " want " << static_cast<double>(want);
}

TEST(LoadtestStatistics, MatchesReferenceOnRandomSamples) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> latency(3.0, 1.0);
  for (size_t n = 1; n <= 60; ++n) {
    std::vector<double> x(n);
    for (double& v : x) v = latency(rng);
    const Summary s = summarize(x);
    long double sum = 0;
    for (double v : x) sum += v;
    const std::string where = "n=" + std::to_string(n);
    EXPECT_EQ(s.count, n);
    expect_close(s.mean, sum / static_cast<long double>(n), where + " mean");
    expect_close(s.p50, reference_percentile(x, 50), where + " p50");
    expect_close(s.p90, reference_percentile(x, 90), where + " p90");
    expect_close(s.p95, reference_percentile(x, 95), where + " p95");
    expect_close(s.p99, reference_percentile(x, 99), where + " p99");
    EXPECT_EQ(s.max, *std::max_element(x.begin(), x.end())) << where;
  }
}

TEST(LoadtestStatistics, KnownValues) {
  // numpy.percentile documentation: a = [[10, 7, 4], [3, 2, 1]]; np.percentile(a, 50) == 3.5.
  EXPECT_DOUBLE_EQ(summarize({10, 7, 4, 3, 2, 1}).p50, 3.5);
  // Odd count: the median is the middle element; P0 / P100 are min / max.
  const std::vector<double> sorted = {1, 5, 9};
  EXPECT_DOUBLE_EQ(percentile_sorted(sorted, 50), 5);
  EXPECT_DOUBLE_EQ(percentile_sorted(sorted, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted(sorted, 100), 9);
  const Summary one = summarize({4.25});
  EXPECT_EQ(one.p50, 4.25);
  EXPECT_EQ(one.p99, 4.25);
  EXPECT_EQ(one.max, 4.25);
}

TEST(LoadtestStatistics, EmptyIsNan) {
  const Summary s = summarize({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_TRUE(std::isnan(s.mean));
  EXPECT_TRUE(std::isnan(s.p99));
}

RequestRecord ok_record(double ttft, std::vector<double> itl, int tokens) {
  RequestRecord r;
  r.status = "200";
  r.ttft_ms = ttft;
  r.itl_ms = std::move(itl);
  double e2e = ttft;
  for (double v : r.itl_ms) e2e += v;
  r.e2e_ms = e2e;
  r.output_tokens = tokens;
  return r;
}

TEST(LoadtestReport, ThroughputErrorsAndGoodput) {
  LevelResult level;
  level.closed_loop = true;
  level.level = 2;
  level.duration_s = 4.0;
  level.records.push_back(ok_record(100, {10, 10, 10}, 4));  // meets both SLOs
  level.records.push_back(ok_record(300, {10, 10, 10}, 4));  // TTFT too slow
  level.records.push_back(ok_record(100, {10, 80, 10}, 4));  // one stall over the ITL SLO
  RequestRecord rejected;
  rejected.status = "429";
  rejected.error = "queue full";
  level.records.push_back(rejected);
  RequestRecord refused;
  refused.status = "connect";
  refused.error = "Connection";
  level.records.push_back(refused);
  const auto j = level_json(level, SloOptions{200.0, 50.0});
  EXPECT_EQ(j["concurrency"], 2);
  EXPECT_EQ(j["completed"], 3);
  EXPECT_EQ(j["errors"]["429"], 1);
  EXPECT_EQ(j["errors"]["connect"], 1);
  EXPECT_DOUBLE_EQ(j["request_throughput"].get<double>(), 3 / 4.0);
  EXPECT_DOUBLE_EQ(j["output_throughput"].get<double>(), 12 / 4.0);
  EXPECT_DOUBLE_EQ(j["goodput"].get<double>(), 1 / 4.0);
  // TPOT = (e2e - ttft) / (tokens - 1): 30/3, 30/3, 100/3.
  EXPECT_DOUBLE_EQ(j["tpot_ms"]["max"].get<double>(), 100.0 / 3);
  EXPECT_DOUBLE_EQ(j["itl_ms"]["max"].get<double>(), 80);
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["p50"].get<double>(), 100);
  const auto no_slo = level_json(level, SloOptions{});
  EXPECT_DOUBLE_EQ(no_slo["goodput"].get<double>(), 3 / 4.0);
}

}  // namespace
}  // namespace qs::loadtest
