// Truncation of a token distribution to its candidate set (top-k, top-p, min-p) and the draw of
// one token from that set.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qs {

/// Ids of the tokens that survive top-k, then top-p, then min-p on `probs` (probabilities of a
/// whole vocabulary; they need not sum to 1, only their ratios matter), in ascending id order.
///
/// Tokens are ranked by probability, ties broken by the lower id, so every set is unique:
///  - top-k (k > 0 and k < probs.size(), else disabled): the k highest-ranked tokens, exactly k.
///  - top-p (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration", sec. 3.1,
///    nucleus sampling; disabled when top_p >= 1): renormalize over the top-k set, then keep the
///    shortest ranked prefix whose cumulative probability is >= top_p. A prefix whose sum falls
///    short of top_p by at most 1e-6 (relative) counts as reaching it, so that a boundary that is
///    exact in decimal is not lost to float rounding. Always keeps at least one token.
///  - min-p (Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling for Creative and Coherent
///    LLM Outputs", sec. 3; disabled when min_p <= 0): keep tokens with p >= min_p * p_max,
///    compared exactly (ties at the threshold are kept). The ratio is unaffected by
///    renormalization, so it does not matter that top-k/top-p ran first.
///
/// Cost: a few O(V) scans and no sort of the vocabulary. Every filter keeps a ranked prefix, so
/// it reduces to finding a cut in the ranking: a histogram over the float exponent and top
/// mantissa bits (2048 buckets) locates the bucket holding the cut, and only that bucket's
/// members are ranked (nth_element for top-k, sort for top-p). Only a degenerate distribution
/// with most tokens in one bucket (e.g. all equal) falls back to sorting most of the vocabulary.
/// Throws qs::Error if `probs` is empty or holds a negative, infinite or NaN value.
std::vector<int32_t> filter_candidates(const std::vector<float>& probs, int32_t top_k, float top_p,
                                       float min_p);

/// Same as above for any contiguous row, writing the ids into `kept` (reused as working memory, no
/// allocation once it has grown to probs.size()).
void filter_candidates(std::span<const float> probs, int32_t top_k, float top_p, float min_p,
                       std::vector<int32_t>& kept);

/// Inverse-CDF draw: with S = Σ probs[c] over `candidates` (in the given order), returns the first
/// candidate c whose running sum exceeds u * S, for u in [0, 1). Candidates with probability 0
/// are never returned (the last positive one is returned if rounding leaves u * S uncovered).
/// Throws qs::Error if `candidates` is empty or S is 0.
int32_t draw_candidate(std::span<const float> probs, std::span<const int32_t> candidates, double u);

/// Uniform double in [0, 1) from one raw 64-bit generator output: the top 53 bits scaled by 2^-53.
/// Platform-independent, unlike std::uniform_real_distribution.
inline double unit_double_from_bits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace qs
