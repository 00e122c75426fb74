#include "metrics/recent_requests.h"

#include <algorithm>
#include <vector>

#include "metrics/percentile.h"

namespace qs::metrics {
namespace {

nlohmann::json or_null(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

void RecentRequests::add(const RequestRecord& record) {
  RequestRecord kept = record;
  kept.itl_ms.clear();
  kept.itl_ms.shrink_to_fit();
  std::lock_guard<std::mutex> lock(mutex_);
  records_.push_back(std::move(kept));
  if (records_.size() > capacity_) records_.pop_front();
}

nlohmann::json RecentRequests::slowest_json(size_t n) const {
  std::vector<RequestRecord> copy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    copy.assign(records_.begin(), records_.end());
  }
  std::stable_sort(copy.begin(), copy.end(), [](const RequestRecord& a, const RequestRecord& b) { return a.e2e_ms > b.e2e_ms; });
  if (copy.size() > n) copy.resize(n);
  nlohmann::json out = nlohmann::json::array();
  for (const RequestRecord& r : copy) {
    out.push_back({{"id", r.id},
                   {"e2e_ms", r.e2e_ms},
                   {"queue_ms", r.queue_ms},
                   {"prefill_ms", r.prefill_ms},
                   {"decode_ms", r.decode_ms},
                   {"ttft_ms", or_null(r.ttft_ms)},
                   {"predicted_ttft_ms", or_null(r.predicted_ttft_ms)},
                   {"cached_tokens", r.cached_tokens},
                   {"preemptions", r.preemptions},
                   {"cache", r.cache},
                   {"degraded", r.degraded}});
  }
  return out;
}

nlohmann::json RecentRequests::prediction_error_json() const {
  std::vector<double> errors;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const RequestRecord& r : records_) {
      if (r.ttft_ms && r.predicted_ttft_ms) errors.push_back(*r.ttft_ms - *r.predicted_ttft_ms);
    }
  }
  std::sort(errors.begin(), errors.end());
  return {{"count", errors.size()},
          {"p10", or_null(percentile_of_sorted(errors, 10))},
          {"p50", or_null(percentile_of_sorted(errors, 50))},
          {"p90", or_null(percentile_of_sorted(errors, 90))}};
}

}  // namespace qs::metrics
