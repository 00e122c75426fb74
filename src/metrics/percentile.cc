#include "metrics/percentile.h"

#include <algorithm>
#include <cmath>

namespace qs::metrics {

namespace {

/// numpy's _lerp: a + (b-a)*t, or b - (b-a)*(1-t) when t >= 0.5 (keeps P monotone and exact at t=1).
double lerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

}  // namespace

std::optional<double> percentile_of_sorted(std::span<const double> sorted_samples, double p) {
  if (sorted_samples.empty() || std::isnan(p)) return std::nullopt;
  const size_t n = sorted_samples.size();
  const double h = (std::clamp(p, 0.0, 100.0) / 100.0) * static_cast<double>(n - 1);
  const double floor_h = std::floor(h);
  const auto i = static_cast<size_t>(floor_h);
  if (i + 1 >= n) return sorted_samples[n - 1];
  return lerp(sorted_samples[i], sorted_samples[i + 1], h - floor_h);
}

LatencySummary summarize(std::vector<double> samples) {
  std::erase_if(samples, [](double x) { return std::isnan(x); });  // NaN would break the sort
  LatencySummary summary;
  summary.count = samples.size();
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  double sum = 0.0;
  for (double x : samples) sum += x;
  summary.mean = sum / static_cast<double>(samples.size());
  summary.p50 = percentile_of_sorted(samples, 50.0);
  summary.p90 = percentile_of_sorted(samples, 90.0);
  summary.p95 = percentile_of_sorted(samples, 95.0);
  summary.p99 = percentile_of_sorted(samples, 99.0);
  summary.max = samples.back();
  return summary;
}

}  // namespace qs::metrics
