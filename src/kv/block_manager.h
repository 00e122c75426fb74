// KV block manager with automatic prefix caching: reference-counted blocks, an O(1) free list,
// a hash -> block index of full blocks and an LRU list of cached blocks no sequence references.
//
// Pure bookkeeping over block ids (no KV bytes), unit-testable without a model. Design after
// vLLM's v1 KVCacheManager / nano-vllm's BlockManager (automatic prefix caching) on the paged
// layout of PagedAttention (Kwon et al. 2023):
//   - a full block (kKvBlockSize tokens whose KV is computed) is keyed by
//     block_hash(parent block's key, its token ids); the chain makes a key name the whole prefix;
//   - a hit is verified against the stored parent key and token ids, so a 64-bit hash collision
//     can never hand out the KV of other tokens;
//   - blocks are shared by reference count; a cached block whose count drops to 0 stays indexed
//     and joins the tail of an LRU list; allocation takes never-cached free blocks first and
//     evicts the LRU head only when none is left ("evict only when memory is needed").
// Every operation is O(1) except match_prefix (O(prefix blocks)).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_types.h"

namespace qs {

/// Key of the (empty) prefix that the first block of every sequence chains from.
inline constexpr uint64_t kRootBlockKey = 0x9e3779b97f4a7c15ULL;

/// Key of a full block: a 64-bit mix of the parent block's key and the block's token ids.
uint64_t block_hash(uint64_t parent_key, std::span<const int32_t> tokens);

/// Blocks of a cached prefix found by BlockManager::match_prefix, in position order.
struct PrefixMatch {
  std::vector<int32_t> blocks;
  std::vector<uint64_t> keys;  // block_hash chain of those blocks
  int64_t n_tokens() const { return static_cast<int64_t>(blocks.size()) * kKvBlockSize; }
};

class BlockManager {
 public:
  /// `n_blocks` >= 0 block ids [0, n_blocks); `prefix_caching` false makes match_prefix always
  /// miss and commit_full_block a no-op (every released block is plain free).
  BlockManager(int32_t n_blocks, bool prefix_caching);

  int32_t n_blocks() const { return n_blocks_; }
  bool prefix_caching() const { return prefix_caching_; }
  /// Blocks allocate() can hand out now: never-cached free blocks + evictable cached blocks.
  int32_t n_allocatable() const { return static_cast<int32_t>(free_.size()) + n_lru_; }
  /// Unreferenced blocks that still hold an indexed prefix (the LRU list).
  int32_t n_cached_unreferenced() const { return n_lru_; }
  /// Blocks referenced by at least one sequence.
  int32_t n_referenced() const { return n_blocks_ - n_allocatable(); }
  /// Blocks currently indexed by key (referenced or not).
  int32_t n_indexed() const { return static_cast<int32_t>(index_.size()); }

  /// Takes an unreferenced block with reference count 1: a never-cached free block if any, else
  /// the least recently released cached block (dropped from the index). -1 when none is left.
  int32_t allocate();
  /// Drops one reference. At 0 an indexed block joins the LRU tail, any other becomes free.
  /// Throws qs::Error for an id out of range or a block with no reference (double free).
  void release(int32_t block);
  /// Adds a reference to a block returned by match_prefix (taking it off the LRU list if it was
  /// unreferenced). Throws qs::Error for an id out of range.
  void acquire(int32_t block);

  /// Longest run of indexed full blocks that spells `tokens` from position 0, at most
  /// `max_blocks` blocks. Takes no references: call acquire() on the blocks you keep.
  PrefixMatch match_prefix(std::span<const int32_t> tokens, int64_t max_blocks) const;
  /// Of `blocks`, how many are unreferenced (acquiring them uses up allocatable blocks).
  int32_t count_unreferenced(std::span<const int32_t> blocks) const;

  /// Records that `block` (referenced by the caller) now holds the KV of `tokens`
  /// (kKvBlockSize ids) after the prefix keyed `parent_key`, and returns its key. A key already
  /// indexed for another block leaves this block unindexed (it is freed normally later).
  uint64_t commit_full_block(int32_t block, uint64_t parent_key, std::span<const int32_t> tokens);

 private:
  static constexpr int32_t kNone = -1;
  void check_id(int32_t block) const;
  void lru_push_back(int32_t block);
  void lru_remove(int32_t block);
  void unindex(int32_t block);

  int32_t n_blocks_;
  bool prefix_caching_;
  std::vector<int32_t> ref_count_;        // [n_blocks]
  std::vector<int32_t> free_;             // stack of never-cached unreferenced blocks
  std::vector<uint8_t> indexed_;          // [n_blocks] 1 when the block is in index_
  std::vector<uint64_t> key_;             // [n_blocks] key when indexed
  std::vector<uint64_t> parent_key_;      // [n_blocks] parent key when indexed
  std::vector<int32_t> tokens_;           // [n_blocks, kKvBlockSize] token ids when indexed
  std::vector<int32_t> lru_prev_, lru_next_;  // intrusive doubly-linked LRU list
  int32_t lru_head_ = kNone, lru_tail_ = kNone;
  int32_t n_lru_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;  // key -> block
};

}  // namespace qs
