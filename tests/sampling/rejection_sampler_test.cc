// The accept / resample step of speculative decoding against exact distributions: the output of
// Leviathan et al.'s step must be distributed as the target p whatever the draft q (Theorem 3.5),
// its acceptance rate must be sum_i min(p_i, q_i) (their beta, Definition 3.1); the one-hot form
// (n-gram drafts) accepts with probability p(x) and resamples from p without x. Checked over many
// trials with fixed seeds by Pearson's chi-square against the analytic distribution (7 degrees of
// freedom: the 0.1% critical value is 24.32), with a control that the same check rejects a wrong
// distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "sampling/candidates.h"
#include "sampling/logits_processing.h"
#include "sampling/rejection_sampler.h"
#include "sampling/sampler.h"

namespace qs {
namespace {

constexpr int kTrials = 200000;
constexpr double kChi2Critical7 = 24.32;  // chi-square, 7 df, upper 0.1% point

std::vector<float> normalized(std::vector<double> w) {
  double s = 0;
  for (double v : w) s += v;
  std::vector<float> p;
  for (double v : w) p.push_back(static_cast<float>(v / s));
  return p;
}

// Pearson's statistic of `counts` (n trials) against the distribution `expected`.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& expected, int64_t n) {
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * static_cast<double>(n);
    chi2 += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return chi2;
}

std::vector<double> as_double(const std::vector<float>& p) { return {p.begin(), p.end()}; }

const std::vector<float> kTarget = normalized({0.30, 0.05, 0.20, 0.02, 0.13, 0.10, 0.12, 0.08});

TEST(RejectionSampler, OutputFollowsTheTargetForAnyDraftDistribution) {
  const std::vector<std::vector<float>> drafts = {
      normalized({0.05, 0.40, 0.05, 0.20, 0.05, 0.05, 0.10, 0.10}),  // far from p
      normalized({1, 1, 1, 1, 1, 1, 1, 1}),                          // uniform
      kTarget,                                                        // q == p: always accepted
  };
  for (size_t d = 0; d < drafts.size(); ++d) {
    const std::vector<float>& q = drafts[d];
    std::mt19937_64 rng(1234 + d);
    std::vector<int64_t> counts(8, 0);
    int64_t accepted = 0;
    for (int t = 0; t < kTrials; ++t) {
      const int32_t x = draw_candidate(q, std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}, unit_double_from_bits(rng()));
      const RejectionResult r = rejection_sample(kTarget, q, x, unit_double_from_bits(rng()), unit_double_from_bits(rng()));
      ++counts[static_cast<size_t>(r.token)];
      accepted += r.accepted ? 1 : 0;
    }
    EXPECT_LT(chi_square(counts, as_double(kTarget), kTrials), kChi2Critical7) << "draft " << d;
    double beta = 0;  // Leviathan et al., Definition 3.1: E[accepted] = sum_i min(p_i, q_i)
    for (size_t i = 0; i < 8; ++i) beta += std::min(kTarget[i], q[i]);
    beta = std::min(beta, 1.0);  // float sums may round above 1 (q == p)
    const double rate = static_cast<double>(accepted) / kTrials;
    EXPECT_NEAR(rate, beta, 4 * std::sqrt(beta * (1 - beta) / kTrials) + 1e-9) << "draft " << d;
    // Control: the same counts are far from the draft distribution unless q == p.
    if (d < 2) EXPECT_GT(chi_square(counts, as_double(q), kTrials), 100 * kChi2Critical7) << "draft " << d;
  }
}

TEST(RejectionSampler, OneHotDraftAcceptsWithTargetProbabilityAndResamplesWithoutIt) {
  for (const int32_t x : {0, 3, 6}) {
    std::mt19937_64 rng(99 + x);
    std::vector<int64_t> counts(8, 0), rejected_counts(8, 0);
    int64_t accepted = 0;
    std::vector<float> one_hot(8, 0.0f);
    one_hot[static_cast<size_t>(x)] = 1.0f;
    std::vector<int64_t> general_counts(8, 0);
    for (int t = 0; t < kTrials; ++t) {
      const RejectionResult r = rejection_sample_one_hot(kTarget, x, unit_double_from_bits(rng()));
      EXPECT_EQ(r.accepted, r.token == x);
      ++counts[static_cast<size_t>(r.token)];
      if (r.accepted) {
        ++accepted;
      } else {
        ++rejected_counts[static_cast<size_t>(r.token)];
      }
      // Algorithm 1 with q = one-hot(x) must give the same law.
      const RejectionResult g = rejection_sample(kTarget, one_hot, x, unit_double_from_bits(rng()), unit_double_from_bits(rng()));
      ++general_counts[static_cast<size_t>(g.token)];
    }
    EXPECT_LT(chi_square(counts, as_double(kTarget), kTrials), kChi2Critical7) << "x " << x;
    EXPECT_LT(chi_square(general_counts, as_double(kTarget), kTrials), kChi2Critical7) << "x " << x;
    const double px = kTarget[static_cast<size_t>(x)];
    EXPECT_NEAR(static_cast<double>(accepted) / kTrials, px, 4 * std::sqrt(px * (1 - px) / kTrials));
    // On rejection: p without x, renormalized (6 degrees of freedom over the other 7 tokens: the
    // 0.1% point is 22.46; x's cell is empty by construction).
    EXPECT_EQ(rejected_counts[static_cast<size_t>(x)], 0);
    const int64_t n_rejected = kTrials - accepted;
    double chi2 = 0;
    for (size_t i = 0; i < 8; ++i) {
      if (static_cast<int32_t>(i) == x) continue;
      const double e = kTarget[i] / (1 - px) * static_cast<double>(n_rejected);
      chi2 += (static_cast<double>(rejected_counts[i]) - e) * (static_cast<double>(rejected_counts[i]) - e) / e;
    }
    EXPECT_LT(chi2, 22.46) << "x " << x;
  }
}

// The engine's form: the backend's Sampler draws every verified row from the processed target
// distribution (here temperature 0.7 and top-k 6 over fixed logits: p known in closed form) and
// the engine accepts while the draw equals the draft. Per position the output must follow p and
// the draft must be accepted with probability p(x).
TEST(RejectionSampler, SamplerDrawsCompareToDraftsAsTheOneHotStep) {
  const std::vector<float> logits = {1.0f, 0.2f, 2.0f, -1.0f, 0.5f, 1.5f, -0.3f, 0.9f};
  SamplingParams params;
  params.temperature = 0.7f;
  params.top_k = 6;
  params.seed = 2024;
  // Exact p: softmax(l / T) over the 6 largest logits (ids 3 and 6 are cut).
  std::vector<double> p(8, 0.0);
  double z = 0;
  for (size_t i = 0; i < 8; ++i) {
    if (i == 3 || i == 6) continue;
    p[i] = std::exp(static_cast<double>(logits[i]) / 0.7);
    z += p[i];
  }
  for (double& v : p) v /= z;
  Sampler sampler(params, 8);
  const int32_t x = 5;
  std::vector<int64_t> counts(8, 0);
  int64_t accepted = 0;
  for (int t = 0; t < kTrials; ++t) {
    std::vector<float> row = logits;
    const int32_t sampled[2] = {sampler.sample(row, {}, {}), 0};
    const int32_t drafts[1] = {x};
    accepted += count_accepted(drafts, std::span<const int32_t>(sampled, 2)) == 1 ? 1 : 0;
    ++counts[static_cast<size_t>(sampled[0])];
  }
  EXPECT_EQ(counts[3] + counts[6], 0);
  std::vector<int64_t> kept;
  std::vector<double> kept_p;
  for (size_t i = 0; i < 8; ++i) {
    if (i == 3 || i == 6) continue;
    kept.push_back(counts[i]);
    kept_p.push_back(p[i]);
  }
  EXPECT_LT(chi_square(kept, kept_p, kTrials), 20.52);  // 5 df, 0.1% point
  EXPECT_NEAR(static_cast<double>(accepted) / kTrials, p[5], 4 * std::sqrt(p[5] * (1 - p[5]) / kTrials));
}

TEST(RejectionSampler, CountAcceptedStopsAtTheFirstMismatch) {
  const std::vector<int32_t> drafts = {4, 5, 6};
  EXPECT_EQ(count_accepted(drafts, std::vector<int32_t>{4, 5, 6, 9}), 3);
  EXPECT_EQ(count_accepted(drafts, std::vector<int32_t>{4, 7, 6, 9}), 1);
  EXPECT_EQ(count_accepted(drafts, std::vector<int32_t>{1, 5, 6, 9}), 0);
  EXPECT_EQ(count_accepted({}, std::vector<int32_t>{3}), 0);
  EXPECT_THROW(count_accepted(drafts, std::vector<int32_t>{4, 5, 6}), Error);
}

TEST(RejectionSampler, RejectsBadInput) {
  const std::vector<float> q = normalized({1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_THROW(rejection_sample(kTarget, std::vector<float>(7, 0.1f), 0, 0.5, 0.5), Error);
  EXPECT_THROW(rejection_sample(kTarget, q, 8, 0.5, 0.5), Error);
  std::vector<float> zero_at_2 = q;
  zero_at_2[2] = 0;
  EXPECT_THROW(rejection_sample(kTarget, zero_at_2, 2, 0.5, 0.5), Error);
  EXPECT_THROW(rejection_sample_one_hot(kTarget, -1, 0.5), Error);
  EXPECT_THROW(rejection_sample_one_hot(std::vector<float>(8, 0.0f), 1, 0.5), Error);
}

}  // namespace
}  // namespace qs
