// Exact latency percentiles over recent requests, for the /stats endpoint.
//
// Two views over the same retained samples:
//   * "window_requests": the last `max_requests` (default 1000) recorded requests;
//   * "window_60s":      requests that finished at most `time_window` (default 60 s) ago.
// Each view summarises TTFT (one sample per request that produced a token), ITL (every
// inter-token gap of every request) and E2E (one per request) from the raw samples, not from
// histogram buckets; percentiles follow numpy.percentile's default linear interpolation (see
// metrics/percentile.h).
//
// Rates over the time window: requests_per_second = requests in the window / W and
// generation_tokens_per_second = completion tokens of those requests / W, where
// W = min(time_window, time since construction), at least 1 s (so a fresh server does not divide
// by ~0). A request's tokens are counted at its finish time.
//
// Thread safety: add() and the readers take one mutex; readers copy the samples under it and sort
// outside it, so a /stats call blocks add() only for the copy.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/percentile.h"
#include "metrics/request_record.h"

namespace qs::metrics {

/// Returns "now" on a steady clock; injected so tests control time.
using SteadyClockFn = std::function<std::chrono::steady_clock::time_point()>;

/// std::chrono::steady_clock::now().
std::chrono::steady_clock::time_point steady_clock_now();

struct RollingWindowOptions {
  std::size_t max_requests = 1000;                 ///< size of the "window_requests" view
  std::chrono::milliseconds time_window{60'000};   ///< span of the "window_60s" view
  std::size_t max_retained = 100'000;              ///< hard memory cap: beyond it the oldest
                                                   ///< samples go even if inside time_window
};

/// Summaries of one view.
struct WindowView {
  std::size_t requests = 0;
  std::int64_t generation_tokens = 0;
  LatencySummary ttft_ms;
  LatencySummary itl_ms;
  LatencySummary e2e_ms;
};

class RollingWindow {
 public:
  explicit RollingWindow(SteadyClockFn clock = steady_clock_now, RollingWindowOptions options = {});

  /// Adds a finished request, stamped with clock() as its finish time.
  void add(const RequestRecord& record);

  WindowView last_requests_view() const;
  WindowView time_window_view() const;
  double requests_per_second() const;
  double generation_tokens_per_second() const;

  /// {"window_requests": view, "window_60s": view, "requests_per_second": x,
  ///  "generation_tokens_per_second": y}; a view is {"requests", "generation_tokens",
  ///  "ttft_ms", "itl_ms", "e2e_ms"} with each latency {count, mean, p50, p90, p95, p99, max}
  ///  (null when count is 0).
  nlohmann::json stats_json() const;

 private:
  struct Sample {
    std::chrono::steady_clock::time_point finished_at;
    std::optional<double> ttft_ms;
    std::vector<double> itl_ms;
    double e2e_ms = 0.0;
    std::int64_t generation_tokens = 0;
  };
  struct RawView {
    std::size_t requests = 0;
    std::int64_t generation_tokens = 0;
    std::vector<double> ttft_ms, itl_ms, e2e_ms;
    void append(const Sample& sample);
  };

  void prune_locked(std::chrono::steady_clock::time_point now);
  RawView collect_last_requests_locked() const;
  RawView collect_time_window_locked(std::chrono::steady_clock::time_point now) const;
  double rate_seconds(std::chrono::steady_clock::time_point now) const;
  static WindowView summarize_view(RawView raw);

  SteadyClockFn clock_;
  RollingWindowOptions options_;
  std::chrono::steady_clock::time_point created_at_;
  mutable std::mutex mutex_;
  std::deque<Sample> samples_;  // oldest first
};

/// {count, mean, p50, p90, p95, p99, max}; absent statistics are null.
nlohmann::json summary_json(const LatencySummary& summary);

}  // namespace qs::metrics
