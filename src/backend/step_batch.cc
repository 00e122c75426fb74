#include "backend/step_batch.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace qs {

int32_t StepBatch::seq_of_token(int32_t i) const {
  const auto starts = query_start_loc();
  // The last s with starts[s] <= i.
  const auto it = std::upper_bound(starts.begin(), starts.end() - 1, i);
  return static_cast<int32_t>(it - starts.begin()) - 1;
}

void StepBatchBuilder::clear() {
  entries_.clear();
  tokens_.clear();
  tables_.clear();
}

int32_t StepBatchBuilder::add_sequence(std::span<const int32_t> tokens, int32_t first_position,
                                       std::span<const int32_t> block_table, int32_t want_logits) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < 1) throw Error("StepBatchBuilder: a sequence needs at least one token");
  if (first_position < 0) throw Error("StepBatchBuilder: negative position");
  if (want_logits < 0 || want_logits > n) throw Error("StepBatchBuilder: want_logits outside [0, n]");
  const int64_t last = first_position + n - 1;
  if (last / kKvBlockSize >= static_cast<int64_t>(block_table.size())) {
    throw Error("StepBatchBuilder: block table of " + std::to_string(block_table.size()) +
                " blocks does not cover position " + std::to_string(last));
  }
  entries_.push_back({tokens_.size(), static_cast<int32_t>(n), first_position, tables_.size(),
                      static_cast<int32_t>(block_table.size()), want_logits});
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  tables_.insert(tables_.end(), block_table.begin(), block_table.end());
  return static_cast<int32_t>(entries_.size() - 1);
}

void StepBatchBuilder::build(StepBatch& out) const {
  int32_t n_tokens = 0, n_logits = 0, max_blocks = 0;
  for (const Entry& e : entries_) {
    n_tokens += e.n;
    n_logits += e.want_logits;
    max_blocks = std::max(max_blocks, e.n_blocks);
  }
  const auto n_seqs = static_cast<int32_t>(entries_.size());
  out.n_tokens_ = n_tokens;
  out.n_seqs_ = n_seqs;
  out.n_logits_ = n_logits;
  out.max_blocks_per_seq_ = max_blocks;
  out.data_.assign(3 * static_cast<size_t>(n_tokens) + 2 * static_cast<size_t>(n_seqs) + 1 +
                       static_cast<size_t>(n_seqs) * max_blocks + n_logits,
                   -1);
  int32_t* token_ids = out.data_.data();
  int32_t* positions = token_ids + n_tokens;
  int32_t* slots = positions + n_tokens;
  int32_t* starts = slots + n_tokens;
  int32_t* seq_lens = starts + n_seqs + 1;
  int32_t* tables = seq_lens + n_seqs;
  int32_t* logits = tables + static_cast<size_t>(n_seqs) * max_blocks;
  int32_t t = 0, l = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const Entry& e = entries_[s];
    starts[s] = t;
    const int32_t* table = tables_.data() + e.table_begin;
    std::copy(table, table + e.n_blocks, tables + static_cast<size_t>(s) * max_blocks);
    for (int32_t i = 0; i < e.n; ++i, ++t) {
      const int32_t pos = e.first_position + i;
      token_ids[t] = tokens_[e.token_begin + i];
      positions[t] = pos;
      slots[t] = table[pos / kKvBlockSize] * kKvBlockSize + pos % kKvBlockSize;
      if (i >= e.n - e.want_logits) logits[l++] = t;
    }
    seq_lens[s] = e.first_position + e.n;
  }
  starts[n_seqs] = t;
}

}  // namespace qs
