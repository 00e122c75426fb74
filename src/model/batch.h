// One forward step's input: flat tokens of several sequences, prefill and decode mixed.
//
// Token i belongs to sequences[seq_index[i]] and sits at positions[i] of that sequence. The KV of
// positions [0, positions[i]) must already be in the cache or earlier in this batch; the step
// writes token i's K/V at positions[i] through the sequence's block table, which must already
// cover it. Logits are produced for the tokens listed in `logits_indices`, in that order.
#pragma once

#include <cstdint>
#include <vector>

namespace qs {

struct BatchSequence {
  const std::vector<int32_t>* block_table = nullptr;  // KV block ids in position order
};

struct Batch {
  std::vector<int32_t> token_ids;       // [n_tokens]
  std::vector<int32_t> positions;       // [n_tokens]
  std::vector<int32_t> seq_index;       // [n_tokens] index into `sequences`
  std::vector<int32_t> logits_indices;  // [n_logits] token indices that need logits
  std::vector<BatchSequence> sequences;

  int64_t n_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t n_logits() const { return static_cast<int64_t>(logits_indices.size()); }

  /// Appends tokens [begin, begin + n) of `tokens` for sequence `seq` at positions starting at
  /// `first_position`; `want_last_logits` requests logits for the last appended token.
  void add_tokens(int32_t seq, const int32_t* tokens, int64_t n, int32_t first_position,
                  bool want_last_logits) {
    for (int64_t i = 0; i < n; ++i) {
      token_ids.push_back(tokens[i]);
      positions.push_back(first_position + static_cast<int32_t>(i));
      seq_index.push_back(seq);
    }
    if (want_last_logits && n > 0) logits_indices.push_back(static_cast<int32_t>(token_ids.size() - 1));
  }

  void clear() {
    token_ids.clear();
    positions.clear();
    seq_index.clear();
    logits_indices.clear();
    sequences.clear();
  }
};

}  // namespace qs
