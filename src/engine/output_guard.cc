#include "engine/output_guard.h"

#include <algorithm>

namespace qs {

bool is_blank_or_punct(std::string_view text) {
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    const bool punct = (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
                       (c >= 0x7b && c <= 0x7e);
    return space || punct;
  });
}

OutputGuard::OutputGuard(OutputGuardOptions options) : options_(options) {
  options_.max_ngram = std::max(options_.max_ngram, 1);
  history_.assign(static_cast<size_t>(options_.max_ngram), 0);
  periodic_run_.assign(static_cast<size_t>(options_.max_ngram) + 1, 0);
}

std::string_view OutputGuard::push(int32_t token, bool blank) {
  if (!options_.enabled) return {};
  const auto ring = static_cast<int64_t>(history_.size());
  // periodic_run_[n]: how many of the latest tokens equal the token n positions before them. The
  // last r * n tokens are one n-gram repeated r times exactly when that run is >= (r - 1) * n.
  bool repeated = false;
  for (int64_t n = 1; n <= ring; ++n) {
    const bool same = n_tokens_ >= n && history_[(n_tokens_ - n) % ring] == token;
    periodic_run_[n] = same ? periodic_run_[n] + 1 : 0;
    if (options_.ngram_repeats > 1 && periodic_run_[n] >= (options_.ngram_repeats - 1) * n) repeated = true;
  }
  history_[n_tokens_ % ring] = token;
  ++n_tokens_;
  blank_run_ = blank ? blank_run_ + 1 : 0;
  if (options_.max_blank_run > 0 && blank_run_ > options_.max_blank_run) return "degenerate_blank_run";
  if (repeated) return "degenerate_repetition";
  return {};
}

}  // namespace qs
