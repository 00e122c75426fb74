#include "sampling/logits_processing.h"

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace qs {
namespace {

void check_token(int32_t token, size_t vocab_size, const char* what) {
  if (token < 0 || static_cast<size_t>(token) >= vocab_size) {
    throw Error(std::string("sampling: ") + what + " token id " + std::to_string(token) +
                " outside vocabulary [0, " + std::to_string(vocab_size) + ")");
  }
}

// Records prompt/output occurrences in scratch.stats (see PenaltyScratch) and the distinct ids in
// scratch.touched.
void count_tokens(size_t vocab_size, std::span<const int32_t> prompt_ids,
                  std::span<const int32_t> output_ids, bool include_prompt,
                  PenaltyScratch& scratch) {
  if (scratch.stats.size() < vocab_size) scratch.stats.resize(vocab_size, 0);
  scratch.touched.clear();
  for (int32_t token : output_ids) {
    check_token(token, vocab_size, "output");
    uint32_t& s = scratch.stats[token];
    if (s == 0) scratch.touched.push_back(token);
    s = (s | 1u) + 2u;
  }
  if (!include_prompt) return;
  for (int32_t token : prompt_ids) {
    check_token(token, vocab_size, "prompt");
    uint32_t& s = scratch.stats[token];
    if (s == 0) {
      scratch.touched.push_back(token);
      s = 1u;
    }
  }
}

}  // namespace

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [token, value] : bias) {
    check_token(token, logits.size(), "logit_bias");
    logits[token] += value;
  }
}

void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                     PenaltyScratch& scratch) {
  const float rep = params.repetition_penalty;
  const float freq = params.frequency_penalty;
  const float pres = params.presence_penalty;
  const bool use_rep = rep != 1.0f;
  if (!use_rep && freq == 0.0f && pres == 0.0f) return;
  count_tokens(logits.size(), prompt_ids, output_ids, use_rep, scratch);
  for (int32_t token : scratch.touched) {
    uint32_t& s = scratch.stats[token];
    float& logit = logits[token];
    if (use_rep) logit = logit > 0.0f ? logit / rep : logit * rep;
    const uint32_t count = s >> 1;
    if (count > 0) logit -= static_cast<float>(count) * freq + pres;
    s = 0;
  }
  scratch.touched.clear();
}

void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids) {
  PenaltyScratch scratch;
  apply_penalties(logits, params, prompt_ids, output_ids, scratch);
}

float check_logits(std::span<const float> logits) {
  if (logits.empty()) throw Error("sampling: empty logits");
  float max_logit = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
      throw Error("sampling: logit of token " + std::to_string(i) + " is " +
                  (std::isnan(v) ? "NaN" : "+inf"));
    }
    if (v > max_logit) max_logit = v;
  }
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    throw Error("sampling: every logit is -inf, no token can be sampled");
  }
  return max_logit;
}

int32_t argmax(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

void softmax(std::span<const float> logits, float temperature, std::span<float> probs) {
  if (probs.size() != logits.size()) throw Error("softmax: output size differs from input size");
  if (!(temperature > 0.0f)) throw Error("softmax: temperature must be > 0");
  const float max_logit = check_logits(logits);
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float e = std::exp((logits[i] - max_logit) / temperature);
    probs[i] = e;
    sum += e;
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (float& p : probs) p *= inv;
}

void log_softmax(std::span<const float> logits, std::span<float> out) {
  if (out.size() != logits.size()) {
    throw Error("log_softmax: output size differs from input size");
  }
  const float max_logit = check_logits(logits);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max_logit);
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) {
    out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_z);
  }
}

}  // namespace qs
