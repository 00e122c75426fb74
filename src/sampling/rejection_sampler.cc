#include "sampling/rejection_sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace qs {
namespace {

void check_token(size_t vocab, int32_t token, const char* what) {
  if (token < 0 || static_cast<size_t>(token) >= vocab) {
    throw Error(std::string("rejection sampling: ") + what + " " + std::to_string(token) +
                " outside a vocabulary of " + std::to_string(vocab));
  }
}

// Inverse-CDF draw over weights w(i) >= 0 (summing to S > 0): the first i whose running sum
// exceeds u * S; the last positive weight when rounding leaves u * S uncovered; -1 when S == 0.
template <typename Weight>
int32_t inverse_cdf(size_t n, Weight w, double u) {
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += w(i);
  if (!(total > 0)) return -1;
  const double target = u * total;
  double running = 0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < n; ++i) {
    const double wi = w(i);
    if (wi <= 0) continue;
    last_positive = static_cast<int32_t>(i);
    running += wi;
    if (running > target) return last_positive;
  }
  return last_positive;
}

}  // namespace

RejectionResult rejection_sample(std::span<const float> target_probs, std::span<const float> draft_probs,
                                 int32_t draft_token, double u_accept, double u_resample) {
  const size_t vocab = target_probs.size();
  if (draft_probs.size() != vocab) {
    throw Error("rejection sampling: " + std::to_string(draft_probs.size()) + " draft probabilities for " +
                std::to_string(vocab) + " target probabilities");
  }
  check_token(vocab, draft_token, "draft token");
  const double q = draft_probs[static_cast<size_t>(draft_token)];
  if (!(q > 0)) throw Error("rejection sampling: the draft token has draft probability 0");
  const double p = target_probs[static_cast<size_t>(draft_token)];
  if (u_accept * q < p) return {draft_token, true};
  const int32_t y = inverse_cdf(vocab, [&](size_t i) {
    return std::max(0.0, static_cast<double>(target_probs[i]) - static_cast<double>(draft_probs[i]));
  }, u_resample);
  if (y >= 0) return {y, false};
  // No residual mass: p == q up to rounding, so the rejection had probability ~0. Keep x unless
  // p forbids it (a masked token: then draw from p itself, never emitting a disallowed token).
  if (p > 0) return {draft_token, true};
  const int32_t z = inverse_cdf(vocab, [&](size_t i) { return static_cast<double>(target_probs[i]); }, u_resample);
  if (z < 0) throw Error("rejection sampling: the target probabilities sum to 0");
  return {z, false};
}

RejectionResult rejection_sample(std::span<const float> target_probs, std::span<const float> draft_probs,
                                 int32_t draft_token, double u) {
  if (draft_probs.size() != target_probs.size() || draft_token < 0 ||
      static_cast<size_t>(draft_token) >= target_probs.size()) {
    return rejection_sample(target_probs, draft_probs, draft_token, u, u);  // throws the same errors
  }
  const double q = draft_probs[static_cast<size_t>(draft_token)];
  const double p = target_probs[static_cast<size_t>(draft_token)];
  // Rejected only when u * q >= p, i.e. p < q (u < 1): then q - p > 0 and u' is in [0, 1).
  const double u_resample = q > p ? std::clamp((u * q - p) / (q - p), 0.0, std::nextafter(1.0, 0.0)) : 0.0;
  return rejection_sample(target_probs, draft_probs, draft_token, u, u_resample);
}

RejectionResult rejection_sample_one_hot(std::span<const float> target_probs, int32_t draft_token, double u) {
  check_token(target_probs.size(), draft_token, "draft token");
  const int32_t y = inverse_cdf(target_probs.size(), [&](size_t i) { return static_cast<double>(target_probs[i]); }, u);
  if (y < 0) throw Error("rejection sampling: the target probabilities sum to 0");
  return {y, y == draft_token};
}

int32_t count_accepted(std::span<const int32_t> drafts, std::span<const int32_t> sampled) {
  if (sampled.size() != drafts.size() + 1) {
    throw Error("count_accepted: " + std::to_string(sampled.size()) + " sampled rows for " +
                std::to_string(drafts.size()) + " drafts (expected drafts + 1)");
  }
  int32_t a = 0;
  while (static_cast<size_t>(a) < drafts.size() && sampled[static_cast<size_t>(a)] == drafts[static_cast<size_t>(a)]) ++a;
  return a;
}

}  // namespace qs
