#include "engine/step_costs.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace qs {
namespace {

void update(double& average, double sample) { average = average < 0 ? sample : 0.75 * average + 0.25 * sample; }

}  // namespace

StepCosts::StepCosts(int64_t max_logits_rows) : decode_s_(static_cast<size_t>(std::max<int64_t>(max_logits_rows, 1)) + 1, -1.0) {}

int StepCosts::bucket_of(int64_t c) {
  const int b = static_cast<int>(std::bit_width(static_cast<uint64_t>(std::max<int64_t>(c, 1)))) - 1;
  return std::min(b, kBuckets - 1);
}

void StepCosts::record(int64_t logits_rows, int64_t prefill_tokens, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds) || logits_rows < 0 || prefill_tokens < 0) return;
  if (decode_s_.empty()) return;
  const int64_t extra = prefill_tokens - (logits_rows == 0 ? 1 : 0);
  const int64_t rows = std::max<int64_t>(logits_rows, 1);
  if (extra <= 0) {
    if (logits_rows == 0 && prefill_tokens == 0) return;
    const auto last = static_cast<int64_t>(decode_s_.size()) - 1;
    double& average = decode_s_[static_cast<size_t>(std::min(rows, last))];
    update(average, average < 0 ? seconds : std::min(seconds, 2 * average));  // clipped (file comment)
    return;
  }
  const double base = decode_s(rows);
  if (base <= 0) return;  // the decode part is not known yet: nothing to subtract
  const auto b = static_cast<size_t>(bucket_of(extra));
  const bool first = prefill_tokens_[b] < 0;
  if (!first) {  // clipped at twice the bucket's average step (file comment)
    const double rate = std::max(0.0, prefill_excess_s_[b] / prefill_tokens_[b]);
    seconds = std::min(seconds, 2 * (base + static_cast<double>(extra) * rate));
  }
  prefill_excess_s_[b] = first ? seconds - base : 0.75 * prefill_excess_s_[b] + 0.25 * (seconds - base);
  prefill_tokens_[b] = first ? static_cast<double>(extra) : 0.75 * prefill_tokens_[b] + 0.25 * static_cast<double>(extra);
}

double StepCosts::decode_s(int64_t n) const {
  const auto last = static_cast<int64_t>(decode_s_.size()) - 1;
  if (last < 1) return 0;
  n = std::clamp<int64_t>(n, 1, last);
  const auto at = [this](int64_t i) { return decode_s_[static_cast<size_t>(i)]; };
  if (at(n) >= 0) return at(n);
  int64_t below = n - 1, above = n + 1;
  while (below >= 1 && at(below) < 0) --below;
  while (above <= last && at(above) < 0) ++above;
  const bool has_below = below >= 1, has_above = above <= last;
  if (has_below && has_above) {
    const double f = static_cast<double>(n - below) / static_cast<double>(above - below);
    return at(below) + f * (at(above) - at(below));
  }
  if (!has_below && !has_above) return 0;
  // Extrapolate from the two nearest measured counts on the measured side, slope >= 0.
  const int64_t a = has_below ? below : above;
  int64_t b = has_below ? a - 1 : a + 1;
  while (b >= 1 && b <= last && at(b) < 0) b += has_below ? -1 : 1;
  if (b < 1 || b > last) return at(a);
  const double slope = std::max(0.0, (at(a) - at(b)) / static_cast<double>(a - b));
  return std::max(0.0, at(a) + slope * static_cast<double>(n - a));
}

bool StepCosts::prefill_measured(int64_t c) const {
  return c >= 1 && prefill_tokens_[static_cast<size_t>(bucket_of(c))] > 0;
}

double StepCosts::prefill_token_s(int64_t c) const {
  const int b = bucket_of(c);
  for (int d = 0; d < kBuckets; ++d) {
    for (const int i : {b - d, b + d}) {
      if (i < 0 || i >= kBuckets) continue;
      const auto u = static_cast<size_t>(i);
      if (prefill_tokens_[u] > 0) return std::max(0.0, prefill_excess_s_[u] / prefill_tokens_[u]);
    }
  }
  return 0;
}

bool StepCosts::known() const {
  const bool decode = std::any_of(decode_s_.begin(), decode_s_.end(), [](double v) { return v >= 0; });
  const bool prefill = std::any_of(prefill_tokens_.begin(), prefill_tokens_.end(), [](double v) { return v > 0; });
  return decode && prefill;
}

double StepCosts::step_s(int64_t logits_rows, int64_t prefill_tokens) const {
  if (logits_rows <= 0 && prefill_tokens <= 0) return 0;
  const int64_t extra = std::max<int64_t>(prefill_tokens - (logits_rows <= 0 ? 1 : 0), 0);
  double s = decode_s(std::max<int64_t>(logits_rows, 1));
  if (extra > 0) s += static_cast<double>(extra) * prefill_token_s(extra);
  return s;
}

}  // namespace qs
