// Small statistics helpers shared by the load-time measurements (backend/cpu/decode_prefetch.cc)
// and the benchmarks (cli/bench_spec.cc).
#pragma once

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace qs {

/// The median of `v` (taken by value and sorted): the middle element for an odd count, the mean of
/// the two middle elements for an even one. Throws qs::Error for an empty vector.
inline double median(std::vector<double> v) {
  if (v.empty()) throw Error("median of no samples");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace qs
