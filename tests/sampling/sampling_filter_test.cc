// Candidate-set filters (top-k, top-p, min-p), the inverse-CDF draw and parameter validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampling/candidates.h"
#include "sampling/sampling_params.h"

namespace qs {
namespace {

using Ids = std::vector<int32_t>;

// Hand-made distribution used by most cases below. Ranked: 0 (0.5), 1 (0.2), 2 (0.15), 3 (0.1),
// 4 (0.05).
const std::vector<float> kProbs = {0.5f, 0.2f, 0.15f, 0.1f, 0.05f};

TEST(SamplingFilter, NoFilterKeepsEverything) {
  EXPECT_EQ(filter_candidates(kProbs, 0, 1.0f, 0.0f), (Ids{0, 1, 2, 3, 4}));
  EXPECT_EQ(filter_candidates(kProbs, -1, 1.0f, 0.0f), (Ids{0, 1, 2, 3, 4}));
  EXPECT_EQ(filter_candidates(kProbs, 5, 1.0f, 0.0f), (Ids{0, 1, 2, 3, 4}));
  EXPECT_EQ(filter_candidates(kProbs, 100, 1.0f, 0.0f), (Ids{0, 1, 2, 3, 4}));
}

TEST(SamplingFilter, TopK) {
  EXPECT_EQ(filter_candidates(kProbs, 1, 1.0f, 0.0f), (Ids{0}));
  EXPECT_EQ(filter_candidates(kProbs, 2, 1.0f, 0.0f), (Ids{0, 1}));
  EXPECT_EQ(filter_candidates(kProbs, 4, 1.0f, 0.0f), (Ids{0, 1, 2, 3}));
  // Unsorted input {0.1, 0.5, 0.05, 0.2, 0.15}: the three largest are ids 1, 3, 4.
  EXPECT_EQ(filter_candidates({0.1f, 0.5f, 0.05f, 0.2f, 0.15f}, 3, 1.0f, 0.0f), (Ids{1, 3, 4}));
  // Ties at the k-th place go to the lower id: {0.3, 0.2, 0.2, 0.2, 0.1}, k = 2 -> {0, 1};
  // k = 3 -> {0, 1, 2}. Exactly k tokens are kept.
  const std::vector<float> tied = {0.3f, 0.2f, 0.2f, 0.2f, 0.1f};
  EXPECT_EQ(filter_candidates(tied, 2, 1.0f, 0.0f), (Ids{0, 1}));
  EXPECT_EQ(filter_candidates(tied, 3, 1.0f, 0.0f), (Ids{0, 1, 2}));
}

TEST(SamplingFilter, TopP) {
  // Cumulative sums in rank order: 0.5, 0.7, 0.85, 0.95, 1.0.
  // top_p 0.8: 0.5 < 0.8, 0.7 < 0.8, 0.85 >= 0.8 -> {0, 1, 2}.
  EXPECT_EQ(filter_candidates(kProbs, 0, 0.8f, 0.0f), (Ids{0, 1, 2}));
  // top_p 0.7: 0.5 < 0.7, 0.7 >= 0.7 (exact boundary) -> {0, 1}.
  EXPECT_EQ(filter_candidates(kProbs, 0, 0.7f, 0.0f), (Ids{0, 1}));
  // top_p 0.85 and 0.95 hit the cumulative sum exactly as well -> {0,1,2} and {0,1,2,3}.
  EXPECT_EQ(filter_candidates(kProbs, 0, 0.85f, 0.0f), (Ids{0, 1, 2}));
  EXPECT_EQ(filter_candidates(kProbs, 0, 0.95f, 0.0f), (Ids{0, 1, 2, 3}));
  // top_p 0.96: 0.95 < 0.96 -> all five.
  EXPECT_EQ(filter_candidates(kProbs, 0, 0.96f, 0.0f), (Ids{0, 1, 2, 3, 4}));
  // top_p 0.5 is reached by the first token alone; top_p 0.1 keeps at least one token.
  EXPECT_EQ(filter_candidates(kProbs, 0, 0.5f, 0.0f), (Ids{0}));
  EXPECT_EQ(filter_candidates(kProbs, 0, 0.1f, 0.0f), (Ids{0}));
  // Unsorted input {0.1, 0.5, 0.05, 0.2, 0.15}, top_p 0.8: ids 1 (0.5), 3 (0.7), 4 (0.85).
  EXPECT_EQ(filter_candidates({0.1f, 0.5f, 0.05f, 0.2f, 0.15f}, 0, 0.8f, 0.0f), (Ids{1, 3, 4}));
  // Unnormalized weights {5, 2, 1.5, 1, 0.5} (sum 10) give the same set as kProbs.
  EXPECT_EQ(filter_candidates({5.0f, 2.0f, 1.5f, 1.0f, 0.5f}, 0, 0.8f, 0.0f), (Ids{0, 1, 2}));
  // Ties inside the nucleus are ranked by id: {0.3, 0.2, 0.2, 0.2, 0.1}, top_p 0.5:
  // 0.3, then id 1 -> 0.5 >= 0.5 -> {0, 1}.
  EXPECT_EQ(filter_candidates({0.3f, 0.2f, 0.2f, 0.2f, 0.1f}, 0, 0.5f, 0.0f), (Ids{0, 1}));
}

TEST(SamplingFilter, TopPIsMeasuredAfterTopKRenormalization) {
  // top_k 3 keeps {0.5, 0.2, 0.15} (mass 0.85), renormalized to {0.588, 0.235, 0.176}.
  // top_p 0.8: 0.588 < 0.8, 0.588 + 0.235 = 0.824 >= 0.8 -> {0, 1}. (Without renormalization
  // the cumulative 0.7 would fall short and token 2 would be kept too.)
  EXPECT_EQ(filter_candidates(kProbs, 3, 0.8f, 0.0f), (Ids{0, 1}));
  // top_k 2, top_p 0.7: renormalized {0.714, 0.286}; 0.714 >= 0.7 -> {0}.
  EXPECT_EQ(filter_candidates(kProbs, 2, 0.7f, 0.0f), (Ids{0}));
}

TEST(SamplingFilter, MinP) {
  // p_max = 0.5. min_p 0.3 -> threshold 0.15: keeps 0.5, 0.2 and 0.15 (equal to threshold).
  EXPECT_EQ(filter_candidates(kProbs, 0, 1.0f, 0.3f), (Ids{0, 1, 2}));
  // min_p 0.25 -> threshold 0.125 -> {0, 1, 2}; min_p 0.5 -> 0.25 -> {0};
  // min_p 0.1 -> 0.05 -> all (0.05 equals the threshold); min_p 1 -> only the maximum.
  EXPECT_EQ(filter_candidates(kProbs, 0, 1.0f, 0.25f), (Ids{0, 1, 2}));
  EXPECT_EQ(filter_candidates(kProbs, 0, 1.0f, 0.5f), (Ids{0}));
  EXPECT_EQ(filter_candidates(kProbs, 0, 1.0f, 0.1f), (Ids{0, 1, 2, 3, 4}));
  EXPECT_EQ(filter_candidates(kProbs, 0, 1.0f, 1.0f), (Ids{0}));
  // Ties: {0.4, 0.2, 0.2, 0.1, 0.1}. min_p 0.5 -> threshold 0.2 keeps both 0.2s -> {0, 1, 2};
  // min_p 0.25 -> threshold 0.1 keeps both 0.1s -> all; min_p 1 with a tied maximum keeps both.
  const std::vector<float> tied = {0.4f, 0.2f, 0.2f, 0.1f, 0.1f};
  EXPECT_EQ(filter_candidates(tied, 0, 1.0f, 0.5f), (Ids{0, 1, 2}));
  EXPECT_EQ(filter_candidates(tied, 0, 1.0f, 0.25f), (Ids{0, 1, 2, 3, 4}));
  EXPECT_EQ(filter_candidates({0.1f, 0.45f, 0.45f}, 0, 1.0f, 1.0f), (Ids{1, 2}));
}

TEST(SamplingFilter, CombinedFiltersTakeTheSmallestSet) {
  // top_p 0.96 alone keeps all 5, top_k 4 keeps {0..3}, min_p 0.3 keeps {0, 1, 2}.
  EXPECT_EQ(filter_candidates(kProbs, 4, 0.96f, 0.3f), (Ids{0, 1, 2}));
  // top_k 4 (mass 0.95), top_p 0.5 -> 0.5 / 0.95 = 0.526 >= 0.5 -> {0}; min_p 0.1 keeps more.
  EXPECT_EQ(filter_candidates(kProbs, 4, 0.5f, 0.1f), (Ids{0}));
}

// Straightforward full-sort implementation of the documented semantics.
Ids reference_filter(const std::vector<float>& probs, int32_t top_k, float top_p, float min_p) {
  Ids order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  size_t k = top_k > 0 && static_cast<size_t>(top_k) < probs.size() ? top_k : probs.size();
  double mass = 0.0;
  for (size_t i = 0; i < k; ++i) mass += probs[order[i]];
  size_t keep = k;
  if (top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < k; ++i) {
      cumulative += probs[order[i]];
      if (cumulative >= top_p * mass * (1.0 - 1e-6)) {
        keep = i + 1;
        break;
      }
    }
  }
  const double threshold = static_cast<double>(min_p) * probs[order[0]];
  size_t keep_min_p = 0;
  while (keep_min_p < k && probs[order[keep_min_p]] >= threshold) ++keep_min_p;
  if (min_p > 0.0f) keep = std::min(keep, keep_min_p);
  Ids kept(order.begin(), order.begin() + keep);
  std::sort(kept.begin(), kept.end());
  return kept;
}

void expect_matches_reference(const std::vector<float>& probs) {
  for (int32_t top_k : {0, 1, 40, 1000}) {
    for (float top_p : {0.1f, 0.5f, 0.9f, 0.99f, 1.0f}) {
      for (float min_p : {0.0f, 0.01f, 0.2f}) {
        SCOPED_TRACE(testing::Message()
                     << "top_k " << top_k << " top_p " << top_p << " min_p " << min_p);
        EXPECT_EQ(filter_candidates(probs, top_k, top_p, min_p),
                  reference_filter(probs, top_k, top_p, min_p));
      }
    }
  }
}

TEST(SamplingFilter, MatchesFullSortReferenceOnLargeVocabularies) {
  std::mt19937_64 rng(99);
  // exp(scale * u) weights: all equal (0), nearly flat (0.5) .. peaked (10).
  for (double scale : {0.0, 0.5, 3.0, 10.0}) {
    SCOPED_TRACE(testing::Message() << "scale " << scale);
    std::vector<float> probs(20000);
    for (float& p : probs) p = static_cast<float>(std::exp(scale * unit_double_from_bits(rng())));
    expect_matches_reference(probs);
  }
  // Few distinct values (1..8), so most ranks are decided by the id tie-break.
  std::vector<float> tied(20000);
  for (float& p : tied) p = static_cast<float>(1 + (rng() >> 61));
  expect_matches_reference(tied);
}

TEST(SamplingFilter, DegenerateInputs) {
  // All zero: top-p keeps the first-ranked token (id 0), min-p (threshold 0) keeps all.
  EXPECT_EQ(filter_candidates({0.0f, 0.0f, 0.0f}, 0, 0.5f, 0.0f), (Ids{0}));
  EXPECT_EQ(filter_candidates({0.0f, 0.0f, 0.0f}, 0, 1.0f, 0.5f), (Ids{0, 1, 2}));
  // -0 ranks like +0 (below every positive probability).
  EXPECT_EQ(filter_candidates({-0.0f, 0.5f, 0.0f}, 1, 1.0f, 0.0f), (Ids{1}));
  EXPECT_EQ(filter_candidates({-0.0f, 0.5f, 0.0f}, 2, 1.0f, 0.0f), (Ids{0, 1}));
  // 1000 equal probabilities, top_p 0.5: the first 500 ids reach exactly 0.5.
  const std::vector<float> flat(1000, 0.001f);
  const Ids kept = filter_candidates(flat, 0, 0.5f, 0.0f);
  ASSERT_EQ(kept.size(), 500u);
  EXPECT_EQ(kept.front(), 0);
  EXPECT_EQ(kept.back(), 499);
}

TEST(SamplingFilter, RejectsBadProbabilities) {
  EXPECT_THROW(filter_candidates(std::vector<float>{}, 0, 1.0f, 0.0f), Error);
  EXPECT_THROW(filter_candidates({0.5f, -0.1f}, 0, 1.0f, 0.0f), Error);
  EXPECT_THROW(filter_candidates({0.5f, std::nanf("")}, 0, 0.9f, 0.0f), Error);
  EXPECT_THROW(filter_candidates({0.5f, INFINITY}, 0, 1.0f, 0.0f), Error);
}

TEST(SamplingDraw, InverseCdf) {
  // Candidates {0, 2, 3} of {0.5, 0.2, 0.2, 0.1}: weights 0.5, 0.2, 0.1 (sum 0.8), so
  // u in [0, 0.625) -> 0, [0.625, 0.875) -> 2, [0.875, 1) -> 3.
  const std::vector<float> probs = {0.5f, 0.2f, 0.2f, 0.1f};
  const Ids candidates = {0, 2, 3};
  EXPECT_EQ(draw_candidate(probs, candidates, 0.0), 0);
  EXPECT_EQ(draw_candidate(probs, candidates, 0.6), 0);
  EXPECT_EQ(draw_candidate(probs, candidates, 0.7), 2);
  EXPECT_EQ(draw_candidate(probs, candidates, 0.9), 3);
  EXPECT_EQ(draw_candidate(probs, candidates, std::nextafter(1.0, 0.0)), 3);
  // Zero-probability candidates are never drawn.
  EXPECT_EQ(draw_candidate(std::vector<float>{0.0f, 1.0f, 0.0f}, Ids{0, 1, 2}, 0.0), 1);
  EXPECT_EQ(draw_candidate(std::vector<float>{0.0f, 1.0f, 0.0f}, Ids{0, 1, 2}, 0.999999), 1);
  EXPECT_THROW(draw_candidate(probs, Ids{}, 0.5), Error);
  EXPECT_THROW(draw_candidate(std::vector<float>{0.0f, 0.0f}, Ids{0, 1}, 0.5), Error);
}

TEST(SamplingDraw, UnitDoubleFromBits) {
  EXPECT_EQ(unit_double_from_bits(0), 0.0);
  EXPECT_EQ(unit_double_from_bits(~uint64_t{0}), 1.0 - 0x1.0p-53);
  EXPECT_EQ(unit_double_from_bits(uint64_t{1} << 63), 0.5);
}

// Expects validate() to throw a qs::Error whose message names `field`.
void expect_rejected(const SamplingParams& params, const std::string& field) {
  try {
    validate(params, 1000);
    ADD_FAILURE() << "validate() accepted a bad " << field;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(SamplingParamsValidate, AcceptsDefaultsAndBoundaries) {
  EXPECT_NO_THROW(validate(SamplingParams{}, 1000));
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = -5;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 0.01f;
  p.logit_bias = {{0, -100.0f}, {999, 100.0f}};
  EXPECT_NO_THROW(validate(p, 1000));
}

TEST(SamplingParamsValidate, RejectsEachBadField) {
  auto with = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    return p;
  };
  const float nan = std::nanf("");
  for (float v : {-0.1f, nan, INFINITY})
    expect_rejected(with([&](auto& p) { p.temperature = v; }), "temperature");
  for (float v : {0.0f, -0.5f, 1.01f, nan})
    expect_rejected(with([&](auto& p) { p.top_p = v; }), "top_p");
  for (float v : {-0.01f, 1.5f, nan}) expect_rejected(with([&](auto& p) { p.min_p = v; }), "min_p");
  for (float v : {0.0f, -1.0f, nan, INFINITY}) {
    expect_rejected(with([&](auto& p) { p.repetition_penalty = v; }), "repetition_penalty");
  }
  for (float v : {-2.01f, 2.5f, nan}) {
    expect_rejected(with([&](auto& p) { p.presence_penalty = v; }), "presence_penalty");
    expect_rejected(with([&](auto& p) { p.frequency_penalty = v; }), "frequency_penalty");
  }
  for (int32_t id : {-1, 1000, 5000}) {
    expect_rejected(with([&](auto& p) { p.logit_bias = {{id, 1.0f}}; }), "logit_bias");
  }
  for (float v : {-100.5f, 101.0f, nan}) {
    expect_rejected(with([&](auto& p) { p.logit_bias = {{3, v}}; }), "logit_bias[3]");
  }
}

TEST(SamplingParamsValidate, MessageGivesTheAllowedRange) {
  SamplingParams p;
  p.top_p = 1.5f;
  try {
    validate(p, 10);
    FAIL() << "expected qs::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "sampling parameter top_p must be in (0, 1] (got 1.5)");
  }
  EXPECT_THROW(validate(SamplingParams{}, 0), Error);
}

}  // namespace
}  // namespace qs
