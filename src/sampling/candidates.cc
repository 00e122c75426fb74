#include "sampling/candidates.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "core/error.h"

namespace qs {
namespace {

constexpr double kTopPRelativeTolerance = 1e-6;
// Histogram buckets: bits 30..20 of a non-negative finite float (8 exponent bits, 3 mantissa
// bits), i.e. about 9% wide in value.
constexpr int kBucketShift = 20;
constexpr size_t kBuckets = size_t{1} << (31 - kBucketShift);

// Rank key: larger key = ranked earlier. High half: the bits of p, which order like the value for
// p >= 0; low half: ~id, so that among equal probabilities the lower id ranks first. Keys of
// distinct ids differ, so "key >= cut" selects exactly a ranked prefix.
uint64_t rank_key(float p, int32_t id) {
  const uint32_t bits = p == 0.0f ? 0u : std::bit_cast<uint32_t>(p);  // folds -0 into +0
  return (uint64_t{bits} << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}

size_t bucket_of(uint64_t key) { return static_cast<size_t>(key >> (32 + kBucketShift)); }

float prob_of(uint64_t key) { return std::bit_cast<float>(static_cast<uint32_t>(key >> 32)); }

void check_probs(std::span<const float> probs) {
  if (probs.empty()) throw Error("filter_candidates: empty probability vector");
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] >= 0.0f) || !std::isfinite(probs[i])) {
      throw Error("filter_candidates: probability of token " + std::to_string(i) +
                  " is negative, infinite or NaN");
    }
  }
}

// Walks `ids` in rank order, accumulating 1 per token (by_prob false) or its probability, and
// returns the key of the token at which the running total first reaches `target`; 0 (keep all)
// if the total stays below it. Only the histogram bucket containing that token is ranked.
uint64_t find_cut(std::span<const float> probs, std::span<const int32_t> ids, double target,
                  bool by_prob) {
  auto weight = [&](int32_t id) { return by_prob ? static_cast<double>(probs[id]) : 1.0; };
  if (!(target > 0.0)) {  // reached by the first token (all-zero probabilities)
    uint64_t first = 0;
    for (int32_t id : ids) first = std::max(first, rank_key(probs[id], id));
    return first;
  }
  std::array<double, kBuckets> bucket_total{};
  for (int32_t id : ids) bucket_total[bucket_of(rank_key(probs[id], id))] += weight(id);
  double before = 0.0;  // total of all buckets ranked above the current one
  size_t bucket = kBuckets;
  while (bucket > 0 && before + bucket_total[bucket - 1] < target) before += bucket_total[--bucket];
  if (bucket == 0) return 0;
  --bucket;
  std::vector<uint64_t> members;
  for (int32_t id : ids) {
    const uint64_t key = rank_key(probs[id], id);
    if (bucket_of(key) == bucket) members.push_back(key);
  }
  if (!by_prob) {  // top-k: the cut is the (target - before)-th key of the bucket
    auto nth = members.begin() + static_cast<ptrdiff_t>(target - before) - 1;
    std::nth_element(members.begin(), nth, members.end(), std::greater<>());
    return *nth;
  }
  std::sort(members.begin(), members.end(), std::greater<>());
  double cumulative = before;
  for (uint64_t key : members) {
    cumulative += prob_of(key);
    if (cumulative >= target) return key;
  }
  return members.back();  // summation-order rounding: keep the whole bucket
}

// Removes from `ids` every token ranked after `cut`, preserving the ascending id order.
void keep_from_cut(std::span<const float> probs, std::vector<int32_t>& ids, uint64_t cut) {
  std::erase_if(ids, [&](int32_t id) { return rank_key(probs[id], id) < cut; });
}

}  // namespace

void filter_candidates(std::span<const float> probs, int32_t top_k, float top_p, float min_p,
                       std::vector<int32_t>& kept) {
  check_probs(probs);
  const size_t n = probs.size();
  kept.resize(n);
  std::iota(kept.begin(), kept.end(), 0);
  if (top_k > 0 && static_cast<size_t>(top_k) < n) {
    keep_from_cut(probs, kept, find_cut(probs, kept, static_cast<double>(top_k), false));
  }
  double mass = 0.0;  // of the top-k set: top-p is measured on the renormalized distribution
  if (top_p < 1.0f) {
    for (int32_t id : kept) mass += probs[id];
  }
  // min-p keeps a ranked prefix too, so applying it before top-p only shrinks top-p's input.
  if (min_p > 0.0f) {
    float p_max = 0.0f;
    for (int32_t id : kept) p_max = std::max(p_max, probs[id]);
    // A product of two floats is exact in double: ties at the threshold are kept reliably.
    const double threshold = static_cast<double>(min_p) * static_cast<double>(p_max);
    std::erase_if(kept, [&](int32_t id) { return static_cast<double>(probs[id]) < threshold; });
  }
  if (top_p < 1.0f) {
    const double target = static_cast<double>(top_p) * mass * (1.0 - kTopPRelativeTolerance);
    keep_from_cut(probs, kept, find_cut(probs, kept, target, true));
  }
}

std::vector<int32_t> filter_candidates(const std::vector<float>& probs, int32_t top_k, float top_p,
                                       float min_p) {
  std::vector<int32_t> kept;
  filter_candidates(std::span<const float>(probs), top_k, top_p, min_p, kept);
  return kept;
}

int32_t draw_candidate(std::span<const float> probs, std::span<const int32_t> candidates,
                       double u) {
  if (candidates.empty()) throw Error("draw_candidate: no candidates");
  double total = 0.0;
  for (int32_t id : candidates) total += probs[id];
  if (!(total > 0.0)) throw Error("draw_candidate: candidates have zero total probability");
  const double x = u * total;
  double cumulative = 0.0;
  int32_t last_positive = candidates.front();
  for (int32_t id : candidates) {
    if (probs[id] <= 0.0f) continue;
    cumulative += probs[id];
    last_positive = id;
    if (x < cumulative) return id;
  }
  return last_positive;
}

}  // namespace qs
