// One forward step's input, as flat int32 arrays in one contiguous buffer: the shape GPU engines
// use (vLLM v1's CommonAttentionMetadata, FlashInfer's page table), copyable to a device in one go.
//
// Sequence s owns tokens [query_start_loc[s], query_start_loc[s + 1]) of the step. Token i sits at
// positions[i] of its sequence; its K/V row is written to slot slot_mapping[i] =
// block_tables[s][positions[i] / kKvBlockSize] * kKvBlockSize + positions[i] % kKvBlockSize. After
// the step sequence s holds seq_lens[s] tokens of context (the last position of its query + 1);
// the KV of every position below its query's first position must already be in the cache.
// Logits (and sampling) rows are produced for the tokens listed in logits_indices, in that order.
//
// Layout of `data` (all int32, in this order; counts in the header fields):
//   token_ids       [n_tokens]
//   positions       [n_tokens]
//   slot_mapping    [n_tokens]          (-1: write no KV, e.g. a padded row)
//   query_start_loc [n_seqs + 1]        (0 first, n_tokens last)
//   seq_lens        [n_seqs]
//   block_tables    [n_seqs, max_blocks_per_seq]   (-1 past a sequence's last block)
//   logits_indices  [n_logits]
// No pointers into scheduler state: a StepBatch can be copied, stored and replayed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"

namespace qs {

// kKvBlockSize: tokens per KV block (kv/kv_types.h).

class StepBatch {
 public:
  int32_t n_tokens() const { return n_tokens_; }
  int32_t n_seqs() const { return n_seqs_; }
  int32_t n_logits() const { return n_logits_; }
  int32_t max_blocks_per_seq() const { return max_blocks_per_seq_; }

  std::span<const int32_t> token_ids() const { return section(0, n_tokens_); }
  std::span<const int32_t> positions() const { return section(n_tokens_, n_tokens_); }
  std::span<const int32_t> slot_mapping() const { return section(2 * n_tokens_, n_tokens_); }
  std::span<const int32_t> query_start_loc() const { return section(3 * n_tokens_, n_seqs_ + 1); }
  std::span<const int32_t> seq_lens() const { return section(3 * n_tokens_ + n_seqs_ + 1, n_seqs_); }
  /// Row s of block_tables: [max_blocks_per_seq] block ids, -1 past the last block.
  std::span<const int32_t> block_table(int32_t s) const {
    return section(block_tables_offset() + static_cast<size_t>(s) * max_blocks_per_seq_, max_blocks_per_seq_);
  }
  std::span<const int32_t> block_tables() const {
    return section(block_tables_offset(), static_cast<size_t>(n_seqs_) * max_blocks_per_seq_);
  }
  std::span<const int32_t> logits_indices() const {
    return section(block_tables_offset() + static_cast<size_t>(n_seqs_) * max_blocks_per_seq_, n_logits_);
  }
  /// The sequence that token i belongs to (binary search over query_start_loc).
  int32_t seq_of_token(int32_t i) const;
  /// The whole buffer (for a single device copy) and its size in bytes.
  std::span<const int32_t> data() const { return data_; }
  size_t bytes() const { return data_.size() * sizeof(int32_t); }

 private:
  friend class StepBatchBuilder;
  size_t block_tables_offset() const { return 3 * static_cast<size_t>(n_tokens_) + 2 * n_seqs_ + 1; }
  std::span<const int32_t> section(size_t offset, size_t n) const { return {data_.data() + offset, n}; }

  int32_t n_tokens_ = 0, n_seqs_ = 0, n_logits_ = 0, max_blocks_per_seq_ = 0;
  std::vector<int32_t> data_;
};

/// Collects sequences for one step, then lays them out as a StepBatch. Reuses its buffers across
/// steps (no allocation once they have grown to the largest step).
class StepBatchBuilder {
 public:
  void clear();
  /// Adds tokens[0, n) of a sequence at positions [first_position, first_position + n), with the
  /// sequence's block table (which must cover every new position). `want_logits` counts from the
  /// end: 0 = none, 1 = the last token's logits, k = the last k tokens' (speculative
  /// verification). Returns the sequence's index in the batch. Throws qs::Error when n < 1, a
  /// position is negative, the block table does not cover the new positions or want_logits > n.
  int32_t add_sequence(std::span<const int32_t> tokens, int32_t first_position,
                       std::span<const int32_t> block_table, int32_t want_logits);
  /// Lays out the collected sequences into `out` (its buffer is reused).
  void build(StepBatch& out) const;

 private:
  struct Entry { size_t token_begin; int32_t n, first_position; size_t table_begin; int32_t n_blocks, want_logits; };
  std::vector<Entry> entries_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> tables_;
};

}  // namespace qs
