// Percentiles (numpy.percentile default, linear interpolation) and the rolling windows behind /stats,
// driven by an injected clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "metrics/percentile.h"
#include "metrics/rolling_window.h"

namespace qs::metrics {
namespace {

using namespace std::chrono_literals;

/// A steady clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{std::chrono::hours(1000)};
  SteadyClockFn fn() {
    return [this] { return now; };
  }
};

RequestRecord record(double e2e_ms, std::optional<double> ttft_ms = std::nullopt,
                     std::vector<double> itl_ms = {}, std::int64_t completion_tokens = 0) {
  RequestRecord r;
  r.e2e_ms = e2e_ms;
  r.ttft_ms = ttft_ms;
  r.itl_ms = std::move(itl_ms);
  r.completion_tokens = completion_tokens;
  return r;
}

// ---- Percentile definition ----

TEST(MetricsPercentile, HandComputedFiveSamples) {
  // Input deliberately unsorted; sorted x = [15, 20, 35, 40, 50], n = 5, h = (p/100) * (n-1).
  const LatencySummary s = summarize({40.0, 15.0, 50.0, 35.0, 20.0});
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(*s.mean, 32.0);  // (15+20+35+40+50)/5 = 160/5
  EXPECT_DOUBLE_EQ(*s.p50, 35.0);   // h = 0.5*4 = 2 -> x[2] = 35
  EXPECT_DOUBLE_EQ(*s.p90, 46.0);   // h = 0.9*4 = 3.6 -> x[3] + 0.6*(x[4]-x[3]) = 40 + 0.6*10
  EXPECT_DOUBLE_EQ(*s.p95, 48.0);   // h = 3.8 -> 40 + 0.8*10
  EXPECT_DOUBLE_EQ(*s.p99, 49.6);   // h = 3.96 -> 40 + 0.96*10
  EXPECT_EQ(*s.max, 50.0);
}

TEST(MetricsPercentile, HandComputedOneToTen) {
  // x = [1..10], n = 10, h = (p/100) * 9.
  const LatencySummary s = summarize({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_DOUBLE_EQ(*s.mean, 5.5);  // 55/10
  EXPECT_DOUBLE_EQ(*s.p50, 5.5);   // h = 4.5 -> x[4] + 0.5*(x[5]-x[4]) = 5 + 0.5
  EXPECT_DOUBLE_EQ(*s.p90, 9.1);   // h = 8.1 -> 9 + 0.1
  EXPECT_DOUBLE_EQ(*s.p95, 9.55);  // h = 8.55 -> 9 + 0.55
  EXPECT_DOUBLE_EQ(*s.p99, 9.91);  // h = 8.91 -> 9 + 0.91
  EXPECT_EQ(*s.max, 10.0);
}

TEST(MetricsPercentile, EdgeCases) {
  const LatencySummary empty = summarize({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_FALSE(empty.mean || empty.p50 || empty.p95 || empty.max);
  const LatencySummary one = summarize({7.5});
  EXPECT_EQ(*one.p50, 7.5);
  EXPECT_EQ(*one.p99, 7.5);
  EXPECT_EQ(*one.max, 7.5);
  // x = [10, 20]: h = 0.95 * 1 -> 10 + 0.95*10 = 19.5
  EXPECT_DOUBLE_EQ(*summarize({20.0, 10.0}).p95, 19.5);
  const std::vector<double> sorted = {1.0, 2.0, 4.0};
  EXPECT_EQ(*percentile_of_sorted(sorted, 0.0), 1.0);
  EXPECT_EQ(*percentile_of_sorted(sorted, 100.0), 4.0);
  EXPECT_DOUBLE_EQ(*percentile_of_sorted(sorted, 75.0), 3.0);  // h = 1.5 -> 2 + 0.5*2
  EXPECT_EQ(*percentile_of_sorted(sorted, 250.0), 4.0);        // p clamped to [0, 100]
  EXPECT_FALSE(percentile_of_sorted(sorted, NAN).has_value());
  const LatencySummary with_nan = summarize({NAN, 3.0, 1.0});    // NaN dropped: x = [1, 3]
  EXPECT_EQ(with_nan.count, 2u);
  EXPECT_DOUBLE_EQ(*with_nan.p50, 2.0);
}

TEST(MetricsPercentile, MatchesNumpyBitForBit) {
  // Expected values printed by numpy 1.24 (np.percentile(a, p), default method "linear").
  const LatencySummary s = summarize({3.7, 0.2, 12.5, 7.25, 7.25, 1.0e-3, 250.0, 42.42, 5.5, 19.0, 0.75});
  EXPECT_EQ(*s.p50, 7.25);
  EXPECT_EQ(*s.p90, 42.42);
  EXPECT_EQ(*s.p95, 146.21);
  EXPECT_EQ(*s.p99, 229.24200000000008);
  EXPECT_DOUBLE_EQ(*s.mean, 31.688272727272725);
  const LatencySummary t = summarize({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_EQ(*t.p90, 9.1);
  EXPECT_EQ(*t.p95, 9.549999999999999);
  EXPECT_EQ(*t.p99, 9.91);
}

/// Straightforward float64 reference: sort, h = q*(n-1), x[i] + (h-i)*(x[i+1]-x[i]).
double reference_percentile(std::vector<double> x, double p) {
  std::sort(x.begin(), x.end());
  const double h = p / 100.0 * static_cast<double>(x.size() - 1);
  const auto i = static_cast<size_t>(std::floor(h));
  if (i + 1 >= x.size()) return x.back();
  return x[i] + (h - static_cast<double>(i)) * (x[i + 1] - x[i]);
}

TEST(MetricsPercentile, MatchesSortBasedReferenceOnRandomSamples) {
  std::mt19937_64 rng(2024);
  std::lognormal_distribution<double> latency(3.0, 1.0);
  for (size_t n : {1u, 2u, 3u, 10u, 99u, 1000u, 1001u, 4567u}) {
    std::vector<double> x(n);
    for (double& v : x) v = latency(rng);
    const LatencySummary s = summarize(x);
    const std::vector<std::pair<double, double>> checks = {{50, *s.p50}, {90, *s.p90}, {95, *s.p95}, {99, *s.p99}};
    for (const auto& [p, got] : checks) {
      const double want = reference_percentile(x, p);
      EXPECT_NEAR(got, want, 1e-12 * std::fabs(want)) << "n=" << n << " p=" << p;
    }
    double sum = 0.0;
    for (double v : x) sum += v;
    EXPECT_NEAR(*s.mean, sum / static_cast<double>(n), 1e-12 * *s.mean);
    EXPECT_EQ(*s.max, *std::max_element(x.begin(), x.end()));
  }
}

// ---- Rolling windows ----

TEST(MetricsRollingWindow, CountViewKeepsLastThousandRequests) {
  FakeClock clock;
  RollingWindow window(clock.fn());
  for (int i = 0; i < 1005; ++i) {
    window.add(record(i));
    clock.now += 1ms;
  }
  const WindowView view = window.last_requests_view();
  EXPECT_EQ(view.requests, 1000u);
  EXPECT_EQ(view.e2e_ms.count, 1000u);
  EXPECT_EQ(*view.e2e_ms.max, 1004.0);
  EXPECT_DOUBLE_EQ(*view.e2e_ms.mean, 504.5);  // mean of 5..1004
  EXPECT_DOUBLE_EQ(*view.e2e_ms.p50, 504.5);   // h = 0.5*999 = 499.5 -> 504 + 0.5
}

TEST(MetricsRollingWindow, TimeViewDropsSamplesOlderThan60s) {
  FakeClock clock;
  RollingWindow window(clock.fn());
  window.add(record(100.0));  // t = 0
  clock.now += 30s;
  window.add(record(200.0));  // t = 30
  clock.now += 31s;
  window.add(record(300.0));  // t = 61: the t = 0 sample is 61 s old
  WindowView view = window.time_window_view();
  EXPECT_EQ(view.requests, 2u);
  EXPECT_DOUBLE_EQ(*view.e2e_ms.p50, 250.0);
  EXPECT_EQ(window.last_requests_view().requests, 3u);  // the count view still has all three

  clock.now += 29s;  // t = 90: the t = 30 sample is exactly 60 s old and still inside
  EXPECT_EQ(window.time_window_view().requests, 2u);
  clock.now += 1ms;
  view = window.time_window_view();
  EXPECT_EQ(view.requests, 1u);
  EXPECT_EQ(*view.e2e_ms.max, 300.0);
  clock.now += 61s;
  view = window.time_window_view();
  EXPECT_EQ(view.requests, 0u);
  EXPECT_FALSE(view.e2e_ms.p50.has_value());
  EXPECT_EQ(window.last_requests_view().requests, 3u);
}

TEST(MetricsRollingWindow, PoolsEveryInterTokenGapAndSkipsMissingTtft) {
  FakeClock clock;
  RollingWindow window(clock.fn());
  window.add(record(500.0, 40.0, {10.0, 20.0}, 3));
  window.add(record(600.0, 80.0, {30.0}, 2));
  window.add(record(5.0, std::nullopt, {}, 0));
  const WindowView view = window.last_requests_view();
  EXPECT_EQ(view.ttft_ms.count, 2u);
  EXPECT_DOUBLE_EQ(*view.ttft_ms.mean, 60.0);
  EXPECT_EQ(view.itl_ms.count, 3u);
  EXPECT_DOUBLE_EQ(*view.itl_ms.p50, 20.0);
  EXPECT_DOUBLE_EQ(*view.itl_ms.p90, 28.0);  // x = [10, 20, 30], h = 1.8 -> 20 + 0.8*10
  EXPECT_EQ(view.e2e_ms.count, 3u);
  EXPECT_EQ(view.generation_tokens, 5);
}

TEST(MetricsRollingWindow, RatesUseElapsedTimeUpTo60s) {
  FakeClock clock;
  RollingWindow window(clock.fn());
  clock.now += 500ms;
  window.add(record(1.0, 1.0, {}, 50));
  EXPECT_DOUBLE_EQ(window.generation_tokens_per_second(), 50.0);  // elapsed 0.5 s, floored to 1 s
  clock.now += 9500ms;  // t = 10 s
  window.add(record(1.0, 1.0, {}, 150));
  EXPECT_DOUBLE_EQ(window.generation_tokens_per_second(), 20.0);  // 200 tokens / 10 s
  EXPECT_DOUBLE_EQ(window.requests_per_second(), 0.2);            // 2 requests / 10 s
  clock.now += 55s;  // t = 65 s: the t = 0.5 s request is out of the window
  window.add(record(1.0, 1.0, {}, 600));
  EXPECT_DOUBLE_EQ(window.generation_tokens_per_second(), 750.0 / 60.0);
  EXPECT_DOUBLE_EQ(window.requests_per_second(), 2.0 / 60.0);
}

TEST(MetricsRollingWindow, StatsJsonShape) {
  FakeClock clock;
  RollingWindow window(clock.fn());
  nlohmann::json stats = window.stats_json();
  for (const char* view : {"window_requests", "window_60s"}) {
    for (const char* metric : {"ttft_ms", "itl_ms", "e2e_ms"}) {
      const nlohmann::json& s = stats[view][metric];
      EXPECT_EQ(s["count"], 0);
      for (const char* key : {"mean", "p50", "p90", "p95", "p99", "max"}) EXPECT_TRUE(s[key].is_null()) << key;
    }
  }
  window.add(record(100.0, 10.0, {5.0, 7.0}, 3));
  clock.now += 2s;
  stats = window.stats_json();
  EXPECT_EQ(stats["window_requests"]["requests"], 1);
  EXPECT_EQ(stats["window_requests"]["max_requests"], 1000);
  EXPECT_EQ(stats["window_60s"]["window_seconds"], 60.0);
  EXPECT_EQ(stats["window_60s"]["itl_ms"]["count"], 2);
  EXPECT_EQ(stats["window_60s"]["itl_ms"]["max"], 7.0);
  EXPECT_EQ(stats["window_60s"]["e2e_ms"]["p99"], 100.0);
  EXPECT_EQ(stats["window_60s"]["ttft_ms"]["mean"], 10.0);
  EXPECT_DOUBLE_EQ(stats["generation_tokens_per_second"].get<double>(), 1.5);  // 3 tokens / 2 s
  EXPECT_DOUBLE_EQ(stats["requests_per_second"].get<double>(), 0.5);
}

TEST(MetricsRollingWindow, MaxRetainedCapsTheTimeView) {
  FakeClock clock;
  RollingWindow window(clock.fn(), RollingWindowOptions{3, 60s, 5});
  for (int i = 0; i < 10; ++i) window.add(record(i));
  EXPECT_EQ(window.time_window_view().requests, 5u);
  EXPECT_EQ(*window.time_window_view().e2e_ms.max, 9.0);
  EXPECT_EQ(window.last_requests_view().requests, 3u);
  EXPECT_EQ(*window.last_requests_view().e2e_ms.p50, 8.0);  // last three: 7, 8, 9
}

TEST(MetricsRollingWindow, ConcurrentAddAndRead) {
  RollingWindow window;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      const nlohmann::json stats = window.stats_json();
      EXPECT_LE(stats["window_requests"]["requests"].get<int>(), 1000);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) window.add(record(1.0, 1.0, {1.0, 2.0}, 3));
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  EXPECT_EQ(window.last_requests_view().requests, 1000u);
  EXPECT_EQ(window.time_window_view().requests, 8000u);
  EXPECT_EQ(window.time_window_view().itl_ms.count, 16000u);
}

}  // namespace
}  // namespace qs::metrics
