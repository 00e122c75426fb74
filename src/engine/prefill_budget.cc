#include "engine/prefill_budget.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace qs {

PrefillBudget::PrefillBudget(double slack, int64_t max_batched_tokens, int64_t min_tokens, int64_t max_decode,
                             double itl_limit_s)
    : slack_(slack),
      max_tokens_(max_batched_tokens),
      min_tokens_(std::min(min_tokens, max_batched_tokens)),
      itl_limit_s_(itl_limit_s) {
  if (!(slack >= 0) || max_batched_tokens < 1 || min_tokens < 1 || max_decode < 1 || !(itl_limit_s >= 0)) {
    throw Error("PrefillBudget: slack and itl_limit_s must be >= 0, max_batched_tokens, min_tokens and max_decode >= 1");
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

double PrefillBudget::prefill_token_s() const {
  if (n_mixed_ == 0) return prefill_only_token_s_;
  const int n = std::min(n_mixed_, kWindow);
  double excess = 0;
  int64_t tokens = 0;
  for (int i = 0; i < n; ++i) {
    excess += excess_s_[static_cast<size_t>(i)];
    tokens += tokens_[static_cast<size_t>(i)];
  }
  return tokens > 0 ? std::max(0.0, excess / static_cast<double>(tokens)) : 0.0;
}

int64_t PrefillBudget::tokens_with_decode(int64_t n_decode) const {
  const double decode_s = decode_step_s(n_decode);
  const double token_s = prefill_token_s();
  if (slack_ == 0 || decode_s <= 0 || token_s <= 0) return max_tokens_;
  const double allowed = std::floor(slack_ * decode_s / token_s);
  if (allowed >= static_cast<double>(max_tokens_)) return max_tokens_;
  int64_t floor_tokens = min_tokens_;
  if (itl_limit_s_ > decode_s && decode_s + static_cast<double>(floor_tokens) * token_s > itl_limit_s_) {
    // Only smaller chunks keep the ITL limit (file comment).
    const double fits = std::floor((itl_limit_s_ - decode_s) / token_s);
    floor_tokens = std::clamp<int64_t>(static_cast<int64_t>(fits), 1, floor_tokens);
  }
  return std::max(floor_tokens, static_cast<int64_t>(allowed));
}

void PrefillBudget::update(double& average, double sample) {
  average = average <= 0 ? sample : 0.75 * average + 0.25 * std::min(sample, 2 * average);
}

void PrefillBudget::record(int64_t n_decode, int64_t n_prefill, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds) || n_decode < 0 || n_prefill < 0 || n_decode + n_prefill <= 0) return;
  if (n_prefill == 0) {
    const auto last = static_cast<int64_t>(decode_step_s_.size()) - 1;
    update(decode_step_s_[static_cast<size_t>(std::min(n_decode, last))], seconds);
  } else if (n_decode == 0) {
    update(prefill_only_token_s_, seconds / static_cast<double>(n_prefill));
  } else if (const double decode_s = decode_step_s(n_decode); decode_s > 0) {
    if (n_mixed_ > 0) {  // clipped at twice the expected step (file comment)
      seconds = std::min(seconds, 2 * (decode_s + static_cast<double>(n_prefill) * prefill_token_s()));
    }
    const auto slot = static_cast<size_t>(n_mixed_ % kWindow);
    excess_s_[slot] = seconds - decode_s;
    tokens_[slot] = n_prefill;
    ++n_mixed_;
    if (n_mixed_ >= 2 * kWindow) n_mixed_ -= kWindow;  // keeps the slot order, never overflows
  }
}

}  // namespace qs
