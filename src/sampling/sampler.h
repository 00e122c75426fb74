// Per-sequence token sampler: turns one row of logits into the next token id.
//
// Pipeline of Sampler::sample (the order vLLM uses):
//   1. logit_bias                    (additive, logits_processing.h)
//   2. repetition penalty            (prompt + output tokens, logits_processing.h)
//   3. frequency / presence penalty  (output tokens only, logits_processing.h)
//   -- the logits span now holds the "processed" logits; log_softmax of it gives logprobs --
//   4. temperature == 0 or top_k == 1: argmax, ties -> lowest id (no random number used)
//   5. otherwise softmax(logits / temperature), then top-k, top-p, min-p (candidates.h),
//      renormalize over the kept tokens and draw one by inverse CDF.
//
// Reproducibility: the RNG is std::mt19937_64, whose output sequence the C++ standard fixes, and
// each draw turns exactly one 64-bit output into a double in [0, 1) with our own arithmetic (no
// std::*_distribution, whose results are implementation-defined). The same seed, params and
// logits therefore give the same tokens on every platform, up to the rounding of std::exp.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sampling/candidates.h"
#include "sampling/logits_processing.h"
#include "sampling/sampling_params.h"

namespace qs {

class Sampler {
 public:
  /// Validates `params` against `vocab_size` (throws qs::Error, see validate()) and seeds the RNG
  /// with params.seed, or with 64 bits from std::random_device when no seed is given.
  Sampler(const SamplingParams& params, int32_t vocab_size);

  /// Returns the next token. `logits` holds vocab_size f32 values and is modified in place: on
  /// return it contains the processed logits (after steps 1-3 above; not temperature-scaled, not
  /// truncated). `prompt_ids` and `output_ids` are the sequence so far; they are read (and
  /// range-checked) only when a penalty is active. Advances the RNG by one output per
  /// non-greedy call. Throws qs::Error on a size mismatch, an out-of-vocabulary id, or logits that
  /// are NaN / +inf / all -inf.
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt_ids,
                 std::span<const int32_t> output_ids);

  /// The distribution sample() draws from, as a dense vector: applies steps 1-3 to `logits` in
  /// place (as sample() does), then writes `probs` [vocab_size]: one-hot at the argmax when
  /// greedy, else softmax(logits / temperature) restricted to the top-k / top-p / min-p
  /// candidates and renormalized over them (0 elsewhere; sums to 1 up to float rounding). Uses no
  /// RNG output. This is the target p and the draft q of speculative sampling
  /// (rejection_sampler.h). Throws like sample(), and on a `probs` size mismatch.
  void distribution(std::span<float> logits, std::span<const int32_t> prompt_ids,
                    std::span<const int32_t> output_ids, std::span<float> probs);

  /// distribution(), then one token drawn from `probs` by inverse CDF over ascending ids with one
  /// RNG output (none when greedy: the argmax). A sampled draft x ~ q with q(x) > 0 guaranteed.
  int32_t sample_with_distribution(std::span<float> logits, std::span<const int32_t> prompt_ids,
                                   std::span<const int32_t> output_ids, std::span<float> probs);

  /// The next RNG output as a uniform double in [0, 1) (unit_double_from_bits): the one draw of
  /// a non-greedy row, for callers that decide the token themselves (speculative verification).
  double next_uniform() { return unit_double_from_bits(rng_()); }

  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }
  /// The seed in use (params.seed or the one drawn from std::random_device), for logs and replays.
  uint64_t seed() const { return seed_; }
  /// Skips `n` outputs of the RNG, as if n non-greedy draws had happened (replays a sequence's
  /// random stream from its seed, e.g. after preemption).
  void discard(uint64_t n) { rng_.discard(n); }
  /// True when sample() is a plain argmax (temperature 0 or top_k 1).
  bool is_greedy() const { return params_.temperature == 0.0f || params_.top_k == 1; }

 private:
  int32_t sample_from_distribution(std::span<const float> logits);
  void process(std::span<float> logits, std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids);

  SamplingParams params_;
  int32_t vocab_size_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  PenaltyScratch penalty_scratch_;
  std::vector<float> probs_;
  std::vector<int32_t> candidates_;
};

}  // namespace qs
