// Exact sample percentiles, defined as numpy.percentile's default (method="linear", Hyndman & Fan
// 1996 definition 7):
//
//   sorted samples x[0] <= ... <= x[n-1], fraction q = p / 100,
//   h = q * (n - 1),  i = floor(h),  g = h - i,
//   P(p) = x[i] + g * (x[i+1] - x[i])          (P = x[n-1] when i = n-1)
//
// The interpolation is evaluated like numpy's _lerp (for g >= 0.5 as x[i+1] - (1-g)*(x[i+1]-x[i]))
// so results match numpy to the last bit on the same float64 input.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace qs::metrics {

/// P(p) of ascending-sorted `sorted_samples`, p in [0, 100] (clamped); nullopt when there are no
/// samples.
std::optional<double> percentile_of_sorted(std::span<const double> sorted_samples, double p);

/// count, mean, P50/P90/P95/P99 and max of a sample set; every field but count is nullopt when
/// the set is empty. mean = (sum of samples) / count, summed in ascending order.
struct LatencySummary {
  std::size_t count = 0;
  std::optional<double> mean;
  std::optional<double> p50;
  std::optional<double> p90;
  std::optional<double> p95;
  std::optional<double> p99;
  std::optional<double> max;
};

/// Drops NaN samples, sorts the rest (taken by value) and summarises them.
LatencySummary summarize(std::vector<double> samples);

}  // namespace qs::metrics
