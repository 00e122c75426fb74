#include "engine/prefill_budget.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace qs {

PrefillBudget::PrefillBudget(double slack, int64_t max_batched_tokens, int64_t min_tokens, int64_t max_decode)
    : slack_(slack), max_tokens_(max_batched_tokens), min_tokens_(std::min(min_tokens, max_batched_tokens)) {
  if (!(slack >= 0) || max_batched_tokens < 1 || min_tokens < 1 || max_decode < 1) {
    throw Error("PrefillBudget: slack must be >= 0, max_batched_tokens, min_tokens and max_decode >= 1");
  }
  decode_step_s_.assign(static_cast<size_t>(max_decode) + 1, 0.0);
}

double PrefillBudget::decode_step_s(int64_t n_decode) const {
  const auto last = static_cast<int64_t>(decode_step_s_.size()) - 1;
  const int64_t n = std::clamp<int64_t>(n_decode, 1, last);
  for (int64_t m = n; m >= 1; --m) {
    if (decode_step_s_[static_cast<size_t>(m)] > 0) return decode_step_s_[static_cast<size_t>(m)];
  }
  for (int64_t m = n + 1; m <= last; ++m) {
    const double measured = decode_step_s_[static_cast<size_t>(m)];
    if (measured > 0) return measured * static_cast<double>(n) / static_cast<double>(m);
  }
  return 0;
}

int64_t PrefillBudget::tokens_with_decode(int64_t n_decode) const {
  const double decode_s = decode_step_s(n_decode);
  const double token_s = prefill_token_s();
  if (slack_ == 0 || decode_s <= 0 || token_s <= 0) return max_tokens_;
  const double allowed = std::floor(slack_ * decode_s / token_s);
  if (allowed >= static_cast<double>(max_tokens_)) return max_tokens_;
  return std::max(min_tokens_, static_cast<int64_t>(allowed));
}

void PrefillBudget::update(double& average, double sample) {
  average = average <= 0 ? sample : 0.75 * average + 0.25 * sample;
}

void PrefillBudget::record(int64_t n_decode, int64_t n_prefill, double seconds) {
  if (!(seconds > 0) || n_decode < 0 || n_prefill < 0 || n_decode + n_prefill <= 0) return;
  if (n_prefill == 0) {
    const auto last = static_cast<int64_t>(decode_step_s_.size()) - 1;
    update(decode_step_s_[static_cast<size_t>(std::min(n_decode, last))], seconds);
  } else if (n_decode == 0) {
    update(prefill_only_token_s_, seconds / static_cast<double>(n_prefill));
  } else if (const double decode_s = decode_step_s(n_decode); decode_s > 0) {
    const double excess = seconds - decode_s;
    if (excess > 0) update(prefill_token_s_, excess / static_cast<double>(n_prefill));
  }
}

}  // namespace qs
