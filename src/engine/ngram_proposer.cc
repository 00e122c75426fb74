#include "engine/ngram_proposer.h"

#include <algorithm>

namespace qs {

void propose_ngram(std::span<const int32_t> tokens, int32_t ngram_max, int32_t ngram_min, int32_t k,
                   std::vector<int32_t>& out) {
  out.clear();
  const auto len = static_cast<int64_t>(tokens.size());
  if (k < 1 || len < 2) return;
  const int64_t n_hi = std::min<int64_t>(ngram_max, len - 1);
  const int64_t n_lo = std::max<int32_t>(ngram_min, 1);
  for (int64_t n = n_hi; n >= n_lo; --n) {
    const int32_t* key = tokens.data() + (len - n);
    // Occurrence [i, i + n) with i + n <= len - 1 (so at least one token follows it), newest first.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(key, key + n, tokens.data() + i)) continue;
      // Past the end of the sequence the continuation repeats with period len - begin (what
      // the match implies: tokens[j] == tokens[j - period] so far), so a loop of p < k tokens
      // still yields k drafts.
      const int64_t begin = i + n;
      const int64_t period = len - begin;
      for (int64_t t = 0; t < k; ++t) {
        out.push_back(t < period ? tokens[static_cast<size_t>(begin + t)] : out[static_cast<size_t>(t - period)]);
      }
      return;
    }
  }
}

}  // namespace qs
