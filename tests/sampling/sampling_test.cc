// Sampler: reproducibility, greedy decoding, logit processing and sampling frequencies.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "sampling/sampler.h"

namespace qs {
namespace {

using Ids = std::vector<int32_t>;

// Logits with values in [-scale, scale), from a fixed generator (platform-independent).
std::vector<float> random_logits(std::mt19937_64& rng, size_t vocab, double scale) {
  std::vector<float> logits(vocab);
  for (float& v : logits)
    v = static_cast<float>(scale * (2.0 * unit_double_from_bits(rng()) - 1.0));
  return logits;
}

SamplingParams make_params(float temperature, int32_t top_k, float top_p, float min_p) {
  SamplingParams params;
  params.temperature = temperature;
  params.top_k = top_k;
  params.top_p = top_p;
  params.min_p = min_p;
  return params;
}

// Draws `steps` tokens, feeding each one back as output (penalties see a growing sequence).
Ids generate(const SamplingParams& params, size_t vocab, int steps, uint64_t logits_seed) {
  Sampler sampler(params, static_cast<int32_t>(vocab));
  std::mt19937_64 logits_rng(logits_seed);
  const Ids prompt = {1, 2, 3, 5, 8, 13};
  Ids output;
  for (int i = 0; i < steps; ++i) {
    std::vector<float> logits = random_logits(logits_rng, vocab, 4.0);
    output.push_back(sampler.sample(logits, prompt, output));
  }
  return output;
}

TEST(Sampler, StandardMersenneTwisterOutput) {
  // C++ standard [rand.predef]: the 10000th output of a default-constructed mt19937_64.
  std::mt19937_64 rng;
  rng.discard(9999);
  EXPECT_EQ(rng(), 9981545732273789042ull);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 50;
  params.top_p = 0.9f;
  params.min_p = 0.01f;
  params.repetition_penalty = 1.1f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.2f;
  params.seed = 1234;
  const Ids a = generate(params, 2000, 1000, 7);
  const Ids b = generate(params, 2000, 1000, 7);
  ASSERT_EQ(a.size(), 1000u);
  EXPECT_EQ(a, b);
  params.seed = 1235;
  const Ids c = generate(params, 2000, 1000, 7);
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += a[i] != c[i];
  EXPECT_GT(differing, 500);  // different streams agree only by chance
}

TEST(Sampler, GoldenSequenceForFixedSeed) {
  // Guards cross-platform reproducibility: mt19937_64 is standardized and the draw uses only our
  // own arithmetic on dyadic probabilities {1/2, 1/4, 1/8, 1/8}.
  SamplingParams params;
  params.seed = 42;
  Sampler sampler(params, 4);
  Ids tokens;
  for (int i = 0; i < 20; ++i) {
    std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f),
                                 std::log(0.125f)};
    tokens.push_back(sampler.sample(logits, {}, {}));
  }
  EXPECT_EQ(tokens, (Ids{2, 1, 2, 0, 3, 0, 1, 0, 0, 0, 0, 1, 1, 1, 2, 3, 2, 0, 0, 0}));
}

TEST(Sampler, SeedIsReported) {
  SamplingParams params;
  params.seed = 77;
  EXPECT_EQ(Sampler(params, 10).seed(), 77u);
  params.seed.reset();
  EXPECT_NO_THROW(Sampler(params, 10));
}

TEST(Sampler, GreedyIsArgmax) {
  std::mt19937_64 rng(3);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams top1;
  top1.top_k = 1;
  top1.temperature = 1.3f;
  top1.seed = 5;
  Sampler by_temperature(greedy, 1000);
  Sampler by_top_k(top1, 1000);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits = random_logits(rng, 1000, 10.0);
    int32_t expected = 0;
    for (int32_t i = 1; i < 1000; ++i) {
      if (logits[i] > logits[expected]) expected = i;
    }
    std::vector<float> copy = logits;
    EXPECT_EQ(by_temperature.sample(logits, {}, {}), expected);
    EXPECT_EQ(by_top_k.sample(copy, {}, {}), expected);
  }
  Sampler small(greedy, 5);
  std::vector<float> tied = {1.0f, 3.0f, -INFINITY, 3.0f, 2.0f};
  EXPECT_EQ(small.sample(tied, {}, {}), 1);  // ties -> lowest id
}

TEST(SamplingPenalties, HandExample) {
  // logits       {2, -1, 0.5, 3, -2, 1}; prompt {0, 1}; output {1, 3, 3, 5}
  // repetition 2 (set {0, 1, 3, 5}), frequency 0.5, presence 0.25 (output counts 1:1, 3:2, 5:1):
  //   0: 2 > 0 -> 2 / 2 = 1             (prompt only: no frequency/presence)
  //   1: -1 <= 0 -> -1 * 2 = -2; -2 - 0.5 * 1 - 0.25 = -2.75
  //   2: untouched 0.5;  4: untouched -2
  //   3: 3 / 2 = 1.5; 1.5 - 0.5 * 2 - 0.25 = 0.25
  //   5: 1 / 2 = 0.5; 0.5 - 0.5 * 1 - 0.25 = -0.25
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  apply_penalties(logits, params, Ids{0, 1}, Ids{1, 3, 3, 5});
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.75f, 0.5f, 0.25f, -2.0f, -0.25f}));
  // Repetition only: prompt tokens count too, each distinct token is penalized once.
  params.frequency_penalty = params.presence_penalty = 0.0f;
  logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  apply_penalties(logits, params, Ids{0, 0, 4}, Ids{4, 4});
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -1.0f, 0.5f, 3.0f, -4.0f, 1.0f}));
}

TEST(SamplingPenalties, SamplerAppliesBiasThenPenaltiesInPlace) {
  // Bias first: token 0: 2 + 1 = 3, then repetition 3 / 2 = 1.5 (the other order would give 2).
  // token 2: 0.5 + 1.5 = 2 (not in the sequence). token 4: -2 - 100 = -102.
  // token 3: 3 / 2 - 0.5 * 2 - 0.25 = 0.25 as in HandExample; token 1: -2.75; token 5: -0.25.
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  params.logit_bias = {{0, 1.0f}, {2, 1.5f}, {4, -100.0f}};
  Sampler sampler(params, 6);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  EXPECT_EQ(sampler.sample(logits, Ids{0, 1}, Ids{1, 3, 3, 5}), 2);  // argmax of processed
  EXPECT_EQ(logits, (std::vector<float>{1.5f, -2.75f, 2.0f, 0.25f, -102.0f, -0.25f}));
  // The penalty scratch is reset between calls: a fresh call gives the same result.
  logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  sampler.sample(logits, Ids{0, 1}, Ids{1, 3, 3, 5});
  EXPECT_EQ(logits, (std::vector<float>{1.5f, -2.75f, 2.0f, 0.25f, -102.0f, -0.25f}));
}

TEST(SamplingPenalties, RejectsBadInput) {
  SamplingParams params;
  params.presence_penalty = 1.0f;
  params.seed = 1;
  Sampler sampler(params, 4);
  std::vector<float> logits(4, 0.0f);
  EXPECT_THROW(sampler.sample(logits, {}, Ids{4}), Error);
  std::vector<float> short_logits(3, 0.0f);
  EXPECT_THROW(sampler.sample(short_logits, {}, {}), Error);
  std::vector<float> bad = {0.0f, std::nanf(""), 0.0f, 0.0f};
  EXPECT_THROW(sampler.sample(bad, {}, {}), Error);
  std::vector<float> banned(4, -INFINITY);
  EXPECT_THROW(sampler.sample(banned, {}, {}), Error);
  EXPECT_THROW(Sampler(make_params(-1.0f, 0, 1.0f, 0.0f), 4), Error);
}

TEST(SamplingLogProbs, LogSoftmax) {
  // log_softmax({log .5, log .25, log .125, -inf}) = those logits minus log(0.875).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f), -INFINITY};
  std::vector<float> out(4);
  log_softmax(logits, out);
  const double log_z = std::log(0.875);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], logits[i] - log_z, 1e-6);
  EXPECT_EQ(out[3], -INFINITY);
  // Shift invariance and large magnitudes: {1000, 1000} -> {log .5, log .5}.
  const std::vector<float> big = {1000.0f, 1000.0f};
  std::vector<float> out2(2);
  log_softmax(big, out2);
  EXPECT_NEAR(out2[0], std::log(0.5), 1e-6);
  EXPECT_NEAR(out2[1], std::log(0.5), 1e-6);
  std::vector<float> wrong(3);
  EXPECT_THROW(log_softmax(big, wrong), Error);
}

// Pearson chi-square statistic of `counts` against `expected` probabilities (all > 0) for n
// draws; also fails if a category with expected probability 0 was drawn.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& expected,
                  int64_t n) {
  double stat = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " was filtered out but drawn";
      continue;
    }
    const double e = expected[i] * static_cast<double>(n);
    stat += (counts[i] - e) * (counts[i] - e) / e;
  }
  return stat;
}

// Draws n tokens with fixed seed from the 5-token distribution kBase transformed by `params`.
std::vector<int64_t> draw_counts(SamplingParams params, int64_t n) {
  static const std::vector<float> kBase = {0.4f, 0.25f, 0.2f, 0.1f, 0.05f};
  params.seed = 20240601;
  Sampler sampler(params, 5);
  std::vector<int64_t> counts(5, 0);
  std::vector<float> logits(5);
  for (int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < 5; ++t) logits[t] = std::log(kBase[t]);
    ++counts[sampler.sample(logits, {}, {})];
  }
  return counts;
}

// Each case is a fixed-seed statistical test: the statistic must stay below the 0.999 quantile
// of the chi-square distribution with (kept tokens - 1) degrees of freedom
// (df 1: 10.828, df 2: 13.816, df 4: 18.467; standard tables).
TEST(SamplingFrequencies, MatchProbabilitiesWithinChiSquareBound) {
  constexpr int64_t kDraws = 200000;
  struct Case {
    SamplingParams params;
    std::vector<double> expected;
    double bound;
  };
  std::vector<Case> cases;
  cases.push_back({SamplingParams{}, {0.4, 0.25, 0.2, 0.1, 0.05}, 18.467});
  // temperature 0.5 squares the probabilities: {.16, .0625, .04, .01, .0025} / 0.275.
  cases.push_back({make_params(0.5f, 0, 1.0f, 0.0f),
                   {0.16 / 0.275, 0.0625 / 0.275, 0.04 / 0.275, 0.01 / 0.275, 0.0025 / 0.275},
                   18.467});
  // top_k 3 keeps {.4, .25, .2}, renormalized by 0.85.
  cases.push_back(
      {make_params(1.0f, 3, 1.0f, 0.0f), {0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85, 0, 0}, 13.816});
  // top_p 0.6: 0.4 < 0.6, 0.65 >= 0.6 keeps {.4, .25}, renormalized by 0.65.
  cases.push_back({make_params(1.0f, 0, 0.6f, 0.0f), {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0}, 10.828});
  // min_p 0.3: threshold 0.12 keeps {.4, .25, .2}.
  cases.push_back(
      {make_params(1.0f, 0, 1.0f, 0.3f), {0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85, 0, 0}, 13.816});
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "case " << i);
    const std::vector<int64_t> counts = draw_counts(cases[i].params, kDraws);
    EXPECT_LT(chi_square(counts, cases[i].expected, kDraws), cases[i].bound);
  }
}

TEST(Sampler, FullQwenVocabulary) {
  // One step over the real vocabulary size with every filter active, and a greedy check.
  constexpr size_t kVocab = 151936;
  std::mt19937_64 rng(11);
  std::vector<float> logits = random_logits(rng, kVocab, 8.0);
  logits[123456] = 30.0f;  // dominant token
  SamplingParams params = make_params(0.7f, 40, 0.95f, 0.05f);
  params.seed = 9;
  Sampler sampler(params, kVocab);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> copy = logits;
    EXPECT_EQ(sampler.sample(copy, {}, {}), 123456);
  }
  params.top_k = 0;
  params.min_p = 0.0f;
  params.top_p = 0.999f;
  logits[123456] = 0.0f;
  Sampler wide(params, kVocab);
  std::vector<float> copy = logits;
  const int32_t token = wide.sample(copy, {}, {});
  EXPECT_GE(token, 0);
  EXPECT_LT(token, static_cast<int32_t>(kVocab));
}

}  // namespace
}  // namespace qs
