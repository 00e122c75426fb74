// Speculative sampling with a sampled draft (Leviathan et al. 2023, Algorithm 1) against exact
// distributions on a 6-token vocabulary:
//  - the one-uniform step rejection_sample(p, q, x, u) emits tokens distributed as p for any q
//    (far from p, uniform, q == p, a point mass, q with mass where p is 0), accepts with
//    probability beta = sum_i min(p_i, q_i) (their Definition 3.1), and on rejection emits
//    normalize(max(0, p - q));
//  - the same chi-square check rejects two wrong rules (accept always; resample from p instead
//    of the residual), so it has the power to catch them;
//  - Sampler::distribution is the distribution sample() draws from (temperature, top-k, bias,
//    penalty), and a draft drawn with sample_with_distribution follows it;
//  - the CPU backend's sampler, given a verify row with a sampled draft and its q, emits p after
//    every transform (mask, bias, presence penalty, temperature, top-k, min-p), never a masked
//    token, and the same token for the same seed.
// Trials use fixed seeds; bounds are the 0.1% chi-square points (Wilson-Hilferty,
// support/chi_square.h) and 4.5 standard deviations for rates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_sampler.h"
#include "core/error.h"
#include "sampling/candidates.h"
#include "sampling/rejection_sampler.h"
#include "sampling/sampler.h"
#include "support/chi_square.h"

namespace qs {
namespace {

constexpr int kTrials = 200000;
constexpr double kZ = 3.090;  // standard-normal upper 0.1% point

const std::vector<double> kP = {0.35, 0.25, 0.15, 0.12, 0.08, 0.05};

std::vector<float> as_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

std::vector<double> normalized(std::vector<double> w) {
  double s = 0;
  for (double v : w) s += v;
  for (double& v : w) v /= s;
  return w;
}

int32_t draw(const std::vector<double>& probs, double u) {
  double c = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    c += probs[i];
    if (u < c) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(probs.size()) - 1;
}

int support(const std::vector<double>& p) {
  return static_cast<int>(std::count_if(p.begin(), p.end(), [](double v) { return v > 0; }));
}

double critical(const std::vector<double>& p) { return stats::chi_square_critical(support(p) - 1, kZ); }

struct Outcome {
  std::vector<int64_t> all = std::vector<int64_t>(6, 0);
  std::vector<int64_t> rejected = std::vector<int64_t>(6, 0);
  int64_t accepted = 0;
};

// x ~ q, then the rule under test with one uniform; q's draw and u come from one seeded stream.
template <typename Rule>
Outcome run(const std::vector<double>& q, uint64_t seed, Rule rule) {
  std::mt19937_64 rng(seed);
  Outcome o;
  for (int t = 0; t < kTrials; ++t) {
    const int32_t x = draw(q, unit_double_from_bits(rng()));
    const RejectionResult r = rule(x, unit_double_from_bits(rng()));
    ++o.all[static_cast<size_t>(r.token)];
    if (r.accepted) {
      ++o.accepted;
    } else {
      ++o.rejected[static_cast<size_t>(r.token)];
    }
  }
  return o;
}

const std::vector<std::vector<double>> kDrafts = {
    {0.05, 0.10, 0.40, 0.05, 0.30, 0.10},  // far from p
    {1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6},
    kP,                                    // q == p: always accepted
    {0, 0, 1, 0, 0, 0},                    // a point mass (a deterministic draft)
    {0.5, 0.5, 0, 0, 0, 0},                // q's support smaller than p's
};

TEST(SpeculativeSampling, OneUniformStepOutputsTheTargetForAnyDraft) {
  const std::vector<float> p = as_float(kP);
  for (size_t d = 0; d < kDrafts.size(); ++d) {
    const std::vector<double>& q = kDrafts[d];
    const std::vector<float> qf = as_float(q);
    const Outcome o = run(q, 77 + d, [&](int32_t x, double u) { return rejection_sample(p, qf, x, u); });
    EXPECT_LT(stats::chi_square(o.all, kP), critical(kP)) << "draft " << d;
    double beta = 0;
    std::vector<double> residual(6);
    for (size_t i = 0; i < 6; ++i) {
      beta += std::min(kP[i], q[i]);
      residual[i] = std::max(0.0, kP[i] - q[i]);
    }
    beta = std::min(beta, 1.0);
    const double rate = static_cast<double>(o.accepted) / kTrials;
    EXPECT_NEAR(rate, beta, 4.5 * std::sqrt(beta * (1 - beta) / kTrials) + 1e-9) << "draft " << d;
    if (beta < 0.999) {  // the tokens emitted on rejection follow normalize(max(0, p - q))
      const std::vector<double> r = normalized(residual);
      for (size_t i = 0; i < 6; ++i) {
        if (r[i] == 0) {
          EXPECT_EQ(o.rejected[i], 0) << "draft " << d << " token " << i;
        }
      }
      if (support(r) > 1) {
        EXPECT_LT(stats::chi_square(o.rejected, r), critical(r)) << "draft " << d;
      }
    } else {
      EXPECT_EQ(o.accepted, kTrials) << "draft " << d;
    }
  }
}

TEST(SpeculativeSampling, TheSameCheckRejectsWrongRules) {
  const std::vector<float> p = as_float(kP);
  const std::vector<double>& q = kDrafts[0];
  const std::vector<float> qf = as_float(q);
  // Accept always: the output is q.
  const Outcome always = run(q, 5, [](int32_t x, double) { return RejectionResult{x, true}; });
  EXPECT_GT(stats::chi_square(always.all, kP), 10 * critical(kP));
  // Accept with min(1, p/q) but resample from p itself: output min(p, q) + (1 - beta) p != p
  // (expected statistic ~0.117 per trial, ~23000 here).
  const Outcome from_p = run(q, 6, [&](int32_t x, double u) {
    const double r = std::min(1.0, kP[static_cast<size_t>(x)] / q[static_cast<size_t>(x)]);
    if (u < r) return RejectionResult{x, true};
    return RejectionResult{draw(kP, (u - r) / (1 - r)), false};
  });
  EXPECT_GT(stats::chi_square(from_p.all, kP), 10 * critical(kP));
  // The right rule on the same seeds passes (the control of the control).
  const Outcome right = run(q, 6, [&](int32_t x, double u) { return rejection_sample(p, qf, x, u); });
  EXPECT_LT(stats::chi_square(right.all, kP), critical(kP));
}

TEST(SpeculativeSampling, MaskedTargetTokensAreNeverEmitted) {
  // p is 0 on tokens 3..5 (a grammar mask), the draft puts most of its mass there.
  const std::vector<double> p = {0.5, 0.3, 0.2, 0, 0, 0};
  const std::vector<double> q = {0.02, 0.02, 0.01, 0.45, 0.3, 0.2};
  const std::vector<float> pf = as_float(p), qf = as_float(q);
  const Outcome o = run(q, 9, [&](int32_t x, double u) { return rejection_sample(pf, qf, x, u); });
  EXPECT_EQ(o.all[3] + o.all[4] + o.all[5], 0);
  EXPECT_LT(stats::chi_square(o.all, p), critical(p));
  // Rounding corner: p == q except p(x) = 0 would leave no residual mass; x is still refused.
  const std::vector<float> p2 = {0.5f, 0.5f, 0.0f}, q2 = {0.5f, 0.5f, 1e-9f};
  for (const double u : {0.0, 0.5, 0.999}) EXPECT_NE(rejection_sample(p2, q2, 2, u).token, 2);
}

// Logits and settings with a distribution known in closed form. Processed logits: bias +1 on
// token 1, presence penalty 0.5 on token 2 (in the output), token 5 masked:
// {1.0, 1.2, 1.5, -1.0, 0.5, -inf}; top-k 4 keeps {2, 1, 0, 4}; min-p 0.25 keeps all four
// (p4 / p2 = exp((0.5 - 1.5) / 0.8) = 0.287); p = softmax(l / 0.8) over them.
const std::vector<float> kLogits = {1.0f, 0.2f, 2.0f, -1.0f, 0.5f, 1.5f};
constexpr float kTemperature = 0.8f;

std::vector<double> exact_target() {
  const std::vector<double> l = {1.0, 1.2, 1.5, -1.0, 0.5};
  std::vector<double> p(6, 0.0);
  for (const size_t i : {0u, 1u, 2u, 4u}) p[i] = std::exp(l[i] / kTemperature);
  return normalized(p);
}

SamplingParams target_params(uint64_t seed) {
  SamplingParams s;
  s.temperature = kTemperature;
  s.top_k = 4;
  s.min_p = 0.25f;
  s.presence_penalty = 0.5f;
  s.logit_bias = {{1, 1.0f}};
  s.seed = seed;
  return s;
}

TEST(SpeculativeSampling, SamplerDistributionIsWhatSampleDrawsFrom) {
  const std::vector<double> p = exact_target();
  std::vector<float> logits = kLogits;
  logits[5] = -INFINITY;  // the mask
  const std::vector<int32_t> output = {2};
  Sampler sampler(target_params(1), 6);
  std::vector<float> probs(6);
  std::vector<float> l = logits;
  sampler.distribution(l, {}, output, probs);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(probs[i], p[i], 1e-6) << i;
  std::vector<int64_t> drawn(6, 0);
  for (int t = 0; t < kTrials; ++t) {
    l = logits;
    ++drawn[static_cast<size_t>(sampler.sample_with_distribution(l, {}, output, probs))];
  }
  EXPECT_LT(stats::chi_square(drawn, p), critical(p));
  SamplingParams greedy = target_params(1);
  greedy.temperature = 0;
  Sampler argmax_sampler(greedy, 6);
  l = logits;
  EXPECT_EQ(argmax_sampler.sample_with_distribution(l, {}, output, probs), 2);
  EXPECT_EQ(probs, (std::vector<float>{0, 0, 1, 0, 0, 0}));
}

// One verify row through CpuSampler: row 0 of a batch, draft x ~ q with q given in draft_probs.
SamplingBatch verify_batch(uint64_t seed, int32_t draft, const std::vector<float>& q, bool with_q) {
  const SamplingParams s = target_params(seed);
  SamplingBatch b;
  b.vocab_rows = 6;
  SamplingRow row;
  row.seq_id = 1;
  row.temperature = s.temperature;
  row.top_k = s.top_k;
  row.min_p = s.min_p;
  row.presence_penalty = s.presence_penalty;
  row.seed = seed;
  row.draws = 0;
  row.mask_row = 0;
  b.allowed_mask = {0b011111u};  // token 5 disallowed
  b.history = {2};              // output so far: token 2 (presence penalty)
  row.output_begin = 0;
  row.output_len = 1;
  b.bias_ids = {1};
  b.bias_values = {1.0f};
  row.bias_begin = 0;
  row.bias_len = 1;
  if (with_q) {
    row.draft_token = draft;
    row.draft_probs_row = 0;
    b.draft_probs = q;
  }
  b.rows.push_back(row);
  return b;
}

TEST(SpeculativeSampling, CpuSamplerVerifiesSampledDraftsAgainstTheProcessedTarget) {
  const std::vector<double> p = exact_target();
  // The draft model's q knows nothing of the mask, the bias or top-k.
  const std::vector<double> q = {0.1, 0.05, 0.1, 0.3, 0.15, 0.3};
  const std::vector<float> qf = as_float(q);
  std::mt19937_64 draft_rng(4242);  // the draft's own stream, apart from the target's seeds
  CpuSampler sampler;
  StepOutput out;
  std::vector<int64_t> counts(6, 0);
  int64_t accepted = 0;
  for (int t = 0; t < kTrials / 4; ++t) {
    const int32_t x = draw(q, unit_double_from_bits(draft_rng()));
    const SamplingBatch b = verify_batch(1000 + static_cast<uint64_t>(t), x, qf, true);
    std::vector<float> logits = kLogits;
    sampler.sample(b, logits.data(), out);
    const int32_t token = out.sampled[0];
    ++counts[static_cast<size_t>(token)];
    accepted += token == x ? 1 : 0;
    if (t < 200) {  // reproducible: the same seed and draft give the same token
      std::vector<float> again = kLogits;
      CpuSampler fresh;
      StepOutput out2;
      fresh.sample(b, again.data(), out2);
      EXPECT_EQ(out2.sampled[0], token);
    }
  }
  EXPECT_EQ(counts[3] + counts[5], 0);  // cut by top-k / masked: never emitted
  EXPECT_LT(stats::chi_square(counts, p), critical(p));
  EXPECT_GT(stats::chi_square(counts, q), 10 * critical(p));  // and far from q: the check has power
  double beta = 0;
  for (size_t i = 0; i < 6; ++i) beta += std::min(p[i], q[i]);
  const double n = kTrials / 4.0;
  EXPECT_NEAR(static_cast<double>(accepted) / n, beta, 4.5 * std::sqrt(beta * (1 - beta) / n));
}

TEST(SpeculativeSampling, CpuSamplerGreedyRowsIgnoreTheDraftDistribution) {
  CpuSampler sampler;
  StepOutput out;
  SamplingBatch b = verify_batch(3, 0, as_float({1, 0, 0, 0, 0, 0}), true);
  b.rows[0].temperature = 0;
  std::vector<float> logits = kLogits;
  sampler.sample(b, logits.data(), out);
  EXPECT_EQ(out.sampled[0], 2);  // argmax of the processed logits, not the draft
}

TEST(SpeculativeSampling, CpuSamplerRefusesADraftRowOutOfRange) {
  CpuSampler sampler;
  StepOutput out;
  SamplingBatch b = verify_batch(3, 0, as_float({1, 0, 0, 0, 0, 0}), true);
  b.rows[0].draft_probs_row = 1;
  std::vector<float> logits = kLogits;
  EXPECT_THROW(sampler.sample(b, logits.data(), out), Error);
}

}  // namespace
}  // namespace qs
