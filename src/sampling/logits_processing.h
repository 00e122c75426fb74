// Logit transformations that run before a token is drawn: logit bias, repetition / frequency /
// presence penalties, softmax with temperature, log-softmax (for `logprobs`) and argmax.
//
// All functions work on one row of `vocab_size` f32 logits. They are deterministic: the same input
// gives the same output on every platform up to the rounding of std::exp / std::log.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "sampling/sampling_params.h"

namespace qs {

/// logits[id] += bias for every (id, bias) in `bias`, in order (duplicate ids add up).
/// Throws qs::Error if an id is outside [0, logits.size()).
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

/// Reusable working memory for apply_penalties, so that a per-sequence sampler does not allocate
/// on every step. `stats` grows to vocab_size entries and is all zero between calls.
struct PenaltyScratch {
  std::vector<uint32_t> stats;   // bit 0: token seen in prompt or output; bits 1..: output count
  std::vector<int32_t> touched;  // distinct ids whose stats entry is non-zero
};

/// Applies, in this order:
///  1. Repetition penalty (Keskar et al. 2019, "CTRL: A Conditional Transformer Language Model
///     for Controllable Generation", sec. 4.1, in the sign-aware form of Hugging Face
///     transformers): for every distinct token t in prompt_ids ∪ output_ids,
///       logit[t] = logit[t] > 0 ? logit[t] / r : logit[t] * r.
///  2. Frequency and presence penalties (OpenAI API reference, "Parameter details" of the
///     frequency and presence penalties): with c[t] the number of occurrences of t in output_ids,
///       logit[t] -= c[t] * frequency_penalty + (c[t] > 0 ? 1 : 0) * presence_penalty.
/// Does nothing (and reads no ids) when r == 1 and both penalties are 0. Throws qs::Error for an
/// id outside [0, logits.size()).
void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                     PenaltyScratch& scratch);

/// Convenience overload that allocates its own scratch.
void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids);

/// Throws qs::Error unless every logit is a number (no NaN), none is +inf, and at least one is
/// finite (-inf marks a banned token and is allowed). Returns the maximum logit.
float check_logits(std::span<const float> logits);

/// Index of the largest logit; ties go to the lowest index. `logits` must be non-empty.
int32_t argmax(std::span<const float> logits);

/// probs[i] = exp((logits[i] - max) / temperature) / Σ_j exp((logits[j] - max) / temperature),
/// with temperature > 0. Subtracting the maximum first keeps every exponent <= 0 (no overflow,
/// even for tiny temperatures); the normalizer is accumulated in double. Sizes must match.
void softmax(std::span<const float> logits, float temperature, std::span<float> probs);

/// out[i] = logits[i] - log Σ_j exp(logits[j]) (log-probabilities of the temperature-1
/// distribution), computed as logits[i] - max - log Σ_j exp(logits[j] - max) with the sum in
/// double. Sampler::sample leaves the processed (biased and penalized, not temperature-scaled,
/// not truncated) logits in its input span, so calling this afterwards gives the logprobs to
/// report. Throws qs::Error on a size mismatch or logits rejected by check_logits.
void log_softmax(std::span<const float> logits, std::span<float> out);

}  // namespace qs
