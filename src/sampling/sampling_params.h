// Per-request sampling parameters (the knobs vLLM / llama.cpp / the OpenAI API expose) and their
// validation.
//
// The OpenAI request fields map onto these one to one: temperature, top_p, presence_penalty,
// frequency_penalty, logit_bias, seed; top_k, min_p and repetition_penalty are the common vLLM
// extensions. See sampler.h for the order in which they are applied.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace qs {

struct SamplingParams {
  /// Softmax temperature. 0 selects greedy decoding (argmax, ties -> lowest token id).
  float temperature = 1.0f;
  /// Keep only the k most probable tokens. 0 or negative disables the filter.
  int32_t top_k = 0;
  /// Nucleus sampling: keep the smallest set of most probable tokens whose cumulative probability
  /// reaches top_p. 1 disables the filter.
  float top_p = 1.0f;
  /// Keep tokens whose probability is at least min_p times that of the most probable token.
  /// 0 disables the filter.
  float min_p = 0.0f;
  /// HF/CTRL-style multiplicative penalty, > 1 discourages. Applies to every distinct token that
  /// occurs in the prompt or the output so far. 1 disables it.
  float repetition_penalty = 1.0f;
  /// OpenAI presence penalty: subtracted once from the logit of every token already in the output.
  float presence_penalty = 0.0f;
  /// OpenAI frequency penalty: subtracted from a logit once per occurrence in the output.
  float frequency_penalty = 0.0f;
  /// Additive biases (token id, bias) applied to the raw logits. Duplicate ids add up.
  std::vector<std::pair<int32_t, float>> logit_bias;
  /// RNG seed. Without one, the sampler seeds itself from std::random_device.
  std::optional<uint64_t> seed;
};

/// The logit bias the engine puts on a token it suppresses (vLLM's min_tokens on the stop tokens):
/// far below any logit, so the token is never drawn while another is allowed, yet finite, so a
/// row whose allowed-token mask leaves only that token still picks it. Not a client value.
constexpr float kSuppressLogitBias = -1e30f;

/// Checks every field of `params` for a vocabulary of `vocab_size` tokens and throws qs::Error
/// naming the first offending field, its allowed range and the value received. Allowed:
/// temperature finite and >= 0; top_k any value; top_p in (0, 1]; min_p in [0, 1];
/// repetition_penalty finite and > 0; presence_penalty and frequency_penalty in [-2, 2];
/// logit_bias ids in [0, vocab_size) with values in [-100, 100] or kSuppressLogitBias. NaN is rejected everywhere.
void validate(const SamplingParams& params, int32_t vocab_size);

/// 64 bits from std::random_device: the seed of a request that sets none.
uint64_t random_seed();

}  // namespace qs
