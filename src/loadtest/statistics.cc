#include "loadtest/statistics.h"

#include <limits>
#include <optional>

#include "metrics/percentile.h"

namespace qs::loadtest {
namespace {

double or_nan(std::optional<double> v) { return v.value_or(std::numeric_limits<double>::quiet_NaN()); }

}  // namespace

// The server's /stats and the loadtest report share one percentile definition: metrics/percentile.
double percentile_sorted(std::span<const double> sorted, double q) {
  return or_nan(metrics::percentile_of_sorted(sorted, q));
}

Summary summarize(std::vector<double> values) {
  const metrics::LatencySummary m = metrics::summarize(std::move(values));
  return Summary{m.count, or_nan(m.mean), or_nan(m.p50), or_nan(m.p90), or_nan(m.p95), or_nan(m.p99), or_nan(m.max)};
}

}  // namespace qs::loadtest
