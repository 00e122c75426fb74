// Summary statistics of latency samples: mean, P50/P90/P95/P99 and max.
//
// Percentile definition: linear interpolation between closest ranks, numpy's default
// (`numpy.percentile(x, q, method="linear")`, Hyndman & Fan type 7). With the n samples sorted
// ascending, x[0] <= ... <= x[n-1], the q-th percentile (q in [0, 100]) is
//   r = q / 100 * (n - 1),  lo = floor(r),  hi = min(lo + 1, n - 1),
//   P_q = x[lo] + (r - lo) * (x[hi] - x[lo]).
// So P0 is the minimum, P100 the maximum, and P50 of an even count is the mean of the middle two.
// The mean is the plain arithmetic mean. An empty sample has every field NaN (printed as null).
// Implemented by metrics/percentile.h (the same code serves the server's /stats), which
// interpolates like numpy's _lerp and drops NaN samples.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace qs::loadtest {

struct Summary {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
};

// q-th percentile (0 <= q <= 100) of samples sorted ascending, by the formula above.
// NaN when `sorted` is empty.
double percentile_sorted(std::span<const double> sorted, double q);

// Summary of unsorted samples (copied and sorted internally).
Summary summarize(std::vector<double> values);

}  // namespace qs::loadtest
