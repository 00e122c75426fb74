#include "engine/prefill_budget.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace qs {

PrefillBudget::PrefillBudget(double slack, int64_t max_batched_tokens, int64_t min_tokens)
    : slack_(slack), max_tokens_(max_batched_tokens), min_tokens_(std::min(min_tokens, max_batched_tokens)) {
  if (!(slack >= 0) || max_batched_tokens < 1 || min_tokens < 1) {
    throw Error("PrefillBudget: slack must be >= 0, max_batched_tokens and min_tokens >= 1");
  }
}

int64_t PrefillBudget::tokens_with_decode() const {
  if (slack_ == 0 || decode_step_s_ <= 0 || prefill_token_s_ <= 0) return max_tokens_;
  const double allowed = std::floor(slack_ * decode_step_s_ / prefill_token_s_);
  if (allowed >= static_cast<double>(max_tokens_)) return max_tokens_;
  return std::max(min_tokens_, static_cast<int64_t>(allowed));
}

void PrefillBudget::update(double& average, double sample) {
  average = average <= 0 ? sample : 0.75 * average + 0.25 * sample;
}

void PrefillBudget::record(int64_t n_decode, int64_t n_prefill, double seconds) {
  if (!(seconds > 0) || n_decode + n_prefill <= 0) return;
  if (n_prefill == 0) {
    update(decode_step_s_, seconds);
  } else if (n_decode == 0) {
    update(prefill_token_s_, seconds / static_cast<double>(n_prefill));
  } else if (decode_step_s_ > 0) {
    const double excess = seconds - decode_step_s_;
    if (excess > 0) update(prefill_token_s_, excess / static_cast<double>(n_prefill));
  }
}

}  // namespace qs
