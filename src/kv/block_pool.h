// Free list of fixed-size KV cache blocks and per-sequence block tables.
//
// Pure bookkeeping (ids and counters): unit-testable without a model. A sequence's token at
// position p lives in block block_table[p / block_size], row p % block_size (vLLM's PagedAttention
// layout, Kwon et al. 2023).
#pragma once

#include <cstdint>
#include <vector>

namespace qs {

inline constexpr int32_t kKvBlockSize = 16;  // tokens per KV block

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  int32_t n_blocks() const { return n_blocks_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }

  /// Takes a free block id, or returns -1 when none is left.
  int32_t allocate();
  /// Returns a block to the pool. Throws qs::Error on an id out of range or already free.
  void release(int32_t block_id);

 private:
  int32_t n_blocks_;
  std::vector<int32_t> free_;  // stack of free ids, lowest id on top
  std::vector<uint8_t> is_free_;
};

/// Blocks of one sequence, in position order.
class BlockTable {
 public:
  /// Grows the table so that positions [0, n_tokens) have a block. Returns false (and leaves the
  /// table as it was) when the pool runs out.
  bool reserve(int32_t n_tokens, BlockPool& pool);
  /// Returns every block to the pool and empties the table.
  void release_all(BlockPool& pool);

  const std::vector<int32_t>& blocks() const { return blocks_; }
  int32_t capacity_tokens() const { return static_cast<int32_t>(blocks_.size()) * kKvBlockSize; }

 private:
  std::vector<int32_t> blocks_;
};

}  // namespace qs
