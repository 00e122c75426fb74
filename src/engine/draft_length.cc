#include "engine/draft_length.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace qs {

void AcceptanceEstimate::record(int64_t n, int64_t accepted) {
  if (n < 1 || accepted < 0 || accepted > n) return;
  successes_ = kDecay * successes_ + static_cast<double>(accepted);
  trials_ = kDecay * trials_ + static_cast<double>(accepted + (accepted < n ? 1 : 0));
}

double expected_tokens(double a, int32_t k) {
  double sum = 0, term = 1;
  for (int32_t j = 0; j <= k; ++j, term *= a) sum += term;
  return sum;
}

void choose_draft_lengths(std::span<const double> a, std::span<const int32_t> k_max,
                          const std::function<double(int64_t)>& cost, std::span<int32_t> k) {
  struct Gain {
    double value;  // a_i^j: what the j-th draft of sequence i adds to the expected tokens
    size_t seq;
  };
  std::vector<Gain> gains;
  for (size_t i = 0; i < a.size(); ++i) {
    double g = 1;
    for (int32_t j = 1; j <= k_max[i]; ++j) {
      g *= a[i];
      gains.push_back({g, i});
    }
  }
  // Largest first; per sequence the gains fall with j, so equal values of one sequence keep their
  // order and every prefix takes a prefix of each sequence's drafts.
  std::stable_sort(gains.begin(), gains.end(), [](const Gain& x, const Gain& y) { return x.value > y.value; });
  double tokens = static_cast<double>(a.size());  // each sequence emits at least its sampled token
  size_t best_m = 0;
  double best_rate = tokens / cost(0);
  for (size_t m = 1; m <= gains.size(); ++m) {
    tokens += gains[m - 1].value;
    const double rate = tokens / cost(static_cast<int64_t>(m));
    if (rate > best_rate) {
      best_rate = rate;
      best_m = m;
    }
  }
  std::fill(k.begin(), k.end(), 0);
  for (size_t m = 0; m < best_m; ++m) ++k[gains[m].seq];
}

void adaptive_draft_lengths(const StepCosts& costs, double propose_s_per_draft, std::span<const double> a,
                            std::span<const int32_t> k_max, std::span<int32_t> steps_without_drafts,
                            std::span<int32_t> k) {
  const auto b = static_cast<int64_t>(a.size());
  if (costs.decode_s(std::max<int64_t>(b, 1)) <= 0) {
    std::fill(k.begin(), k.end(), 0);
    return;
  }
  if (!costs.known()) {
    std::copy(k_max.begin(), k_max.end(), k.begin());
    return;
  }
  const double per_draft = std::max(0.0, propose_s_per_draft);
  choose_draft_lengths(a, k_max, [&](int64_t m) { return costs.step_s(b, m) + per_draft * static_cast<double>(m); },
                       k);
  for (size_t i = 0; i < k.size(); ++i) {
    if (k[i] == 0 && k_max[i] >= 1 && ++steps_without_drafts[i] >= kProbeSteps) k[i] = 1;
    if (k[i] > 0) steps_without_drafts[i] = 0;
  }
}

}  // namespace qs
