// engine/draft_length.h: the draft lengths chosen per step against an exhaustive search over every
// combination (the reference), E(a, k) against its closed form, the acceptance estimate against
// exact success / trial counts, and the calibration and probe rules of adaptive_draft_lengths.
#include "engine/draft_length.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace qs {
namespace {

double rate_of(const std::vector<double>& a, const std::vector<int32_t>& k, const std::function<double(int64_t)>& cost) {
  double tokens = 0;
  int64_t m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (int32_t j = 0; j <= k[i]; ++j) tokens += std::pow(a[i], j);  // E(a, k) summed term by term
    m += k[i];
  }
  return tokens / cost(m);
}

// Every combination of k_i in [0, k_max_i]: the best rate, and the smallest total m reaching it.
std::pair<double, int64_t> exhaustive_best(const std::vector<double>& a, const std::vector<int32_t>& k_max,
                                           const std::function<double(int64_t)>& cost) {
  std::vector<int32_t> k(a.size(), 0);
  double best = -1;
  int64_t best_m = 0;
  while (true) {
    const double r = rate_of(a, k, cost);
    int64_t m = 0;
    for (int32_t v : k) m += v;
    if (r > best * (1 + 1e-12) || (std::abs(r - best) <= 1e-12 * best && m < best_m)) {
      best = r;
      best_m = m;
    }
    size_t i = 0;
    while (i < k.size() && k[i] == k_max[i]) k[i++] = 0;
    if (i == k.size()) break;
    ++k[i];
  }
  return {best, best_m};
}

TEST(DraftLength, ChoiceEqualsExhaustiveSearch) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Cost shapes: flat then steep (a CPU: drafts ride on the weight reads until compute binds),
  // linear, concave, and an irregular learned curve.
  const std::vector<std::function<double(int64_t)>> costs = {
      [](int64_t m) { return 45.0 + (m <= 3 ? 0.3 * m : 0.9 + 9.5 * (m - 3)); },
      [](int64_t m) { return 10.0 + 2.0 * m; },
      [](int64_t m) { return 10.0 + 6.0 * std::sqrt(static_cast<double>(m)); },
      [](int64_t m) { return 20.0 + (m % 3 == 0 ? 1.0 : 4.0) * m; },
      [](int64_t) { return 30.0; },  // flat: with a = 0, every m ties and the fewest drafts win
  };
  int cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t b = 1 + rng() % 3;
    std::vector<double> a(b);
    std::vector<int32_t> k_max(b);
    for (size_t i = 0; i < b; ++i) {
      a[i] = trial % 10 == 0 || trial % 5 == 4 ? 0.0 : 0.98 * unit(rng);
      k_max[i] = static_cast<int32_t>(rng() % 5);
    }
    const auto& cost = costs[static_cast<size_t>(trial) % costs.size()];
    std::vector<int32_t> k(b, -1);
    choose_draft_lengths(a, k_max, cost, k);
    int64_t m = 0;
    for (size_t i = 0; i < b; ++i) {
      ASSERT_GE(k[i], 0);
      ASSERT_LE(k[i], k_max[i]);
      m += k[i];
    }
    const auto [best, best_m] = exhaustive_best(a, k_max, cost);
    EXPECT_NEAR(rate_of(a, k, cost), best, 1e-12 * best) << "trial " << trial;
    EXPECT_EQ(m, best_m) << "trial " << trial;
    ++cases;
  }
  EXPECT_EQ(cases, 400);
}

TEST(DraftLength, SteepCostsAndLowAcceptanceGiveFewerDrafts) {
  // The CPU curve measured on the 4B Q4_K_M model (bench --spec-verify 8, Zen 5, 2 threads): k = 0..8
  // verify steps of 44.9, 45.7, 44.9, 44.2, 50.0, 56.4, 68.3, 75.8, 87.5 ms.
  const std::vector<double> ms = {44.9, 45.7, 44.9, 44.2, 50.0, 56.4, 68.3, 75.8, 87.5};
  const auto cost = [&](int64_t m) { return ms[static_cast<size_t>(m)]; };
  const std::vector<int32_t> k_max = {8};
  std::vector<int32_t> k(1);
  // a = 0.3: E = 1.3, 1.39, 1.417, 1.425 for k = 1..4; per ms best at k = 3 (1.417 / 44.2).
  choose_draft_lengths(std::vector<double>{0.3}, k_max, cost, k);
  EXPECT_EQ(k[0], 3);
  // a = 0.95: the best k of the closed form E(a, k) / ms[k], searched here directly.
  choose_draft_lengths(std::vector<double>{0.95}, k_max, cost, k);
  double best = 0;
  int32_t best_k = 0;
  for (int32_t j = 0; j <= 8; ++j) {
    const double r = (1 - std::pow(0.95, j + 1)) / 0.05 / ms[static_cast<size_t>(j)];
    if (r > best) best = r, best_k = j;
  }
  EXPECT_EQ(k[0], best_k);
  // a = 0: a draft never adds a token; k = 3 costs less than k = 0 here (noise in the curve), so
  // the rule takes it: the choice follows the costs, not a rule of thumb.
  choose_draft_lengths(std::vector<double>{0.0}, k_max, cost, k);
  EXPECT_EQ(k[0], 3);
  const auto rising = [](int64_t m) { return 45.0 + 0.5 * static_cast<double>(m); };
  choose_draft_lengths(std::vector<double>{0.0}, k_max, rising, k);
  EXPECT_EQ(k[0], 0);
}

TEST(DraftLength, ExpectedTokensEqualsClosedForm) {
  for (double a : {0.0, 0.1, 0.5, 0.9, 0.999}) {
    for (int32_t k = 0; k <= 16; ++k) {
      EXPECT_NEAR(expected_tokens(a, k), (1 - std::pow(a, k + 1)) / (1 - a), 1e-12) << a << " " << k;
    }
  }
}

TEST(DraftLength, AcceptanceEstimateCountsTrialsUpToTheFirstRejection) {
  AcceptanceEstimate e;
  EXPECT_DOUBLE_EQ(e.rate(), 0.5);  // the prior
  // (4 drafts, 3 accepted): 3 successes in 4 trials; (2, 2): 2 in 2 (no rejection seen). Repeated,
  // the decayed sums converge to (0.8 x 3 + 2) / (0.8 x 4 + 2) for the pair order below: the
  // newest step weighs 1, the one before 0.8.
  for (int i = 0; i < 200; ++i) {
    e.record(4, 3);
    e.record(2, 2);
  }
  EXPECT_NEAR(e.rate(), (0.8 * 3 + 2) / (0.8 * 4 + 2), 1e-9);
  // Invalid records change nothing.
  const double before = e.rate();
  e.record(0, 0);
  e.record(3, 4);
  e.record(3, -1);
  EXPECT_DOUBLE_EQ(e.rate(), before);
  // One of four drafts accepted: 1 success in 2 trials (the second draft was examined and
  // rejected, the last two never were): the rate tends to 1/2, not 1/4.
  for (int i = 0; i < 200; ++i) e.record(4, 1);
  EXPECT_NEAR(e.rate(), 0.5, 1e-9);
  // Every draft rejected at once: 0 successes in 1 trial per step, the rate falls toward 0.
  for (int i = 0; i < 100; ++i) e.record(4, 0);
  EXPECT_LT(e.rate(), 1e-6);
  EXPECT_GT(e.rate(), 0.0);
}

TEST(DraftLength, AdaptiveCalibratesThenChoosesThenProbes) {
  StepCosts costs(4);
  const std::vector<double> a = {0.0, 0.6};
  const std::vector<int32_t> k_max = {4, 4};
  std::vector<int32_t> below = {0, 0}, k(2);
  // Nothing measured: no drafts (a decode-only step measures decode_s).
  adaptive_draft_lengths(costs, a, k_max, below, k);
  EXPECT_EQ(k, (std::vector<int32_t>{0, 0}));
  // A decode step known, no step with m = 8 drafts (bucket 8-15) measured: the full k_max. A
  // prefill chunk of 100 tokens (another bucket) does not count.
  costs.record(2, 0, 0.040);
  costs.record(2, 100, 0.040 + 100 * 0.004);
  adaptive_draft_lengths(costs, a, k_max, below, k);
  EXPECT_EQ(k, (std::vector<int32_t>{4, 4}));
  // A step with 8 drafts at 5 ms each: sequence 0 (a = 0) gets none, sequence 1 (a = 0.6) what the
  // exhaustive rule gives for these costs (2: 2.96 tokens / 50 ms beats 2.6 / 45 and 3.18 / 55).
  costs.record(2, 8, 0.040 + 8 * 0.005);
  const auto cost = [&](int64_t m) { return costs.step_s(2, m); };
  std::vector<int32_t> expect(2);
  choose_draft_lengths(a, k_max, cost, expect);
  ASSERT_EQ(expect, (std::vector<int32_t>{0, 2}));
  for (int32_t step = 1; step <= kProbeSteps; ++step) {
    adaptive_draft_lengths(costs, a, k_max, below, k);
    ASSERT_EQ(k, expect) << "step " << step;
    EXPECT_EQ(below[0], step);
    EXPECT_EQ(below[1], step);
  }
  // After kProbeSteps steps below k_max, a probe of 2k + 1 drafts (capped at k_max); counters reset.
  adaptive_draft_lengths(costs, a, k_max, below, k);
  EXPECT_EQ(k[0], 1);
  EXPECT_EQ(k[1], 4);  // min(k_max 4, 2 x 2 + 1)
  EXPECT_EQ(below, (std::vector<int32_t>{0, 0}));
  // Cheap drafts: both at k_max, their counters stay 0.
  StepCosts cheap(4);
  cheap.record(2, 0, 0.040);
  cheap.record(2, 8, 0.0401);
  const std::vector<double> high = {0.9, 0.9};
  adaptive_draft_lengths(cheap, high, k_max, below, k);
  EXPECT_EQ(k, (std::vector<int32_t>{4, 4}));
  EXPECT_EQ(below, (std::vector<int32_t>{0, 0}));
}

}  // namespace
}  // namespace qs
