#include "sampling/sampler.h"

#include <algorithm>
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
  process(logits, prompt_ids, output_ids);
  if (is_greedy()) return argmax(logits);
  return sample_from_distribution(logits);
}

void Sampler::process(std::span<float> logits, std::span<const int32_t> prompt_ids,
                      std::span<const int32_t> output_ids) {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    throw Error("Sampler: got " + std::to_string(logits.size()) + " logits for a vocabulary of " +
                std::to_string(vocab_size_));
  }
  apply_logit_bias(logits, params_.logit_bias);
  apply_penalties(logits, params_, prompt_ids, output_ids, penalty_scratch_);
  check_logits(logits);
}

void Sampler::distribution(std::span<float> logits, std::span<const int32_t> prompt_ids,
                           std::span<const int32_t> output_ids, std::span<float> probs) {
  if (probs.size() != static_cast<size_t>(vocab_size_)) {
    throw Error("Sampler::distribution: output of " + std::to_string(probs.size()) + " for a vocabulary of " +
                std::to_string(vocab_size_));
  }
  process(logits, prompt_ids, output_ids);
  std::fill(probs.begin(), probs.end(), 0.0f);
  if (is_greedy()) {
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return;
  }
  probs_.resize(logits.size());
  softmax(logits, params_.temperature, probs_);
  filter_candidates(probs_, params_.top_k, params_.top_p, params_.min_p, candidates_);
  double total = 0.0;
  for (int32_t id : candidates_) total += probs_[static_cast<size_t>(id)];
  if (!(total > 0.0)) throw Error("Sampler::distribution: candidates have zero total probability");
  for (int32_t id : candidates_) probs[static_cast<size_t>(id)] = static_cast<float>(probs_[static_cast<size_t>(id)] / total);
}

int32_t Sampler::sample_with_distribution(std::span<float> logits, std::span<const int32_t> prompt_ids,
                                          std::span<const int32_t> output_ids, std::span<float> probs) {
  distribution(logits, prompt_ids, output_ids, probs);
  if (is_greedy()) return static_cast<int32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
  const double x = next_uniform();
  double total = 0.0;
  for (float p : probs) total += p;
  const double target = x * total;
  double cumulative = 0.0;
  int32_t last_positive = -1;
  for (size_t id = 0; id < probs.size(); ++id) {
    if (probs[id] <= 0.0f) continue;
    cumulative += probs[id];
    last_positive = static_cast<int32_t>(id);
    if (target < cumulative) return last_positive;
  }
  return last_positive;  // rounding left x * total uncovered
}

int32_t Sampler::sample_from_distribution(std::span<const float> logits) {
  probs_.resize(logits.size());
  softmax(logits, params_.temperature, probs_);
  filter_candidates(probs_, params_.top_k, params_.top_p, params_.min_p, candidates_);
  return draw_candidate(probs_, candidates_, unit_double_from_bits(rng_()));
}

}  // namespace qs
