// The last successful requests with their latency breakdown, for /stats and the dashboard
// (issue 12): the slowest recent requests and the TTFT prediction error percentiles.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>

#include "metrics/request_record.h"

namespace qs::metrics {

class RecentRequests {
 public:
  /// Keeps the last `capacity` (>= 1) records.
  explicit RecentRequests(size_t capacity = 256) : capacity_(capacity < 1 ? 1 : capacity) {}

  /// Remembers `record` (its breakdown fields only), dropping the oldest beyond the capacity.
  void add(const RequestRecord& record);

  /// The `n` slowest remembered requests by e2e_ms, slowest first: [{id, e2e_ms, queue_ms,
  /// prefill_ms, decode_ms, ttft_ms, predicted_ttft_ms, cached_tokens, preemptions, cache,
  /// degraded}] (ms; ttft_ms / predicted_ttft_ms null when unknown).
  nlohmann::json slowest_json(size_t n) const;

  /// Measured minus predicted TTFT over the remembered requests that have both, ms:
  /// {"count", "p10", "p50", "p90"} (percentiles null when count is 0; numpy's linear method).
  nlohmann::json prediction_error_json() const;

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<RequestRecord> records_;  // oldest first; itl_ms dropped
};

}  // namespace qs::metrics
