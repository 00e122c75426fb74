#include "sampling/sampler.h"

#include <string>

#include "core/error.h"

namespace qs {
uint64_t random_seed() {
  std::random_device device;
  const uint64_t high = device();
  const uint64_t low = device();
  return (high << 32) ^ low;
}

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size)
    : params_(params), vocab_size_(vocab_size) {
  validate(params_, vocab_size_);
  seed_ = params_.seed.has_value() ? *params_.seed : random_seed();
  rng_.seed(seed_);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt_ids,
                        std::span<const int32_t> output_ids) {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    throw Error("Sampler::sample: got " + std::to_string(logits.size()) +
                " logits for a vocabulary of " + std::to_string(vocab_size_));
  }
  apply_logit_bias(logits, params_.logit_bias);
  apply_penalties(logits, params_, prompt_ids, output_ids, penalty_scratch_);
  check_logits(logits);
  if (is_greedy()) return argmax(logits);
  return sample_from_distribution(logits);
}

int32_t Sampler::sample_from_distribution(std::span<const float> logits) {
  probs_.resize(logits.size());
  softmax(logits, params_.temperature, probs_);
  filter_candidates(probs_, params_.top_k, params_.top_p, params_.min_p, candidates_);
  return draw_candidate(probs_, candidates_, unit_double_from_bits(rng_()));
}

}  // namespace qs
