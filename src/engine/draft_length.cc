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

void adaptive_draft_lengths(const StepCosts& costs, std::span<const double> a, std::span<const int32_t> k_max,
                            std::span<int32_t> steps_below_max, std::span<int32_t> k) {
  const auto b = std::max<int64_t>(static_cast<int64_t>(a.size()), 1);
  const double decode = costs.decode_s(b);
  if (decode <= 0) {
    std::fill(k.begin(), k.end(), 0);
    return;
  }
  int64_t m_max = 0;
  for (int32_t v : k_max) m_max += v;
  if (m_max >= 1 && !costs.prefill_measured(m_max)) {
    std::copy(k_max.begin(), k_max.end(), k.begin());
    std::fill(steps_below_max.begin(), steps_below_max.end(), 0);
    return;
  }
  // step_s(B, m) = decode_s(B) + m x prefill_token_s(m), with decode_s(B) looked up once.
  choose_draft_lengths(a, k_max,
                       [&](int64_t m) { return m > 0 ? decode + static_cast<double>(m) * costs.prefill_token_s(m) : decode; },
                       k);
  for (size_t i = 0; i < k.size(); ++i) {
    if (k[i] >= k_max[i]) {
      steps_below_max[i] = 0;
    } else if (steps_below_max[i] >= kProbeSteps) {
      k[i] = std::min(k_max[i], 2 * k[i] + 1);
      steps_below_max[i] = 0;
    } else {
      ++steps_below_max[i];
    }
  }
}

}  // namespace qs
