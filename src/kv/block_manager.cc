#include "kv/block_manager.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace qs {
namespace {

// splitmix64's finalizer: a full-avalanche 64-bit mix (Steele et al., "Fast splittable PRNGs").
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t block_hash(uint64_t parent_key, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent_key ^ 0x6a09e667f3bcc909ULL);
  for (int32_t t : tokens) h = mix64(h ^ static_cast<uint32_t>(t)) + 0x9e3779b97f4a7c15ULL;
  return mix64(h ^ tokens.size());
}

BlockManager::BlockManager(int32_t n_blocks, bool prefix_caching)
    : n_blocks_(n_blocks), prefix_caching_(prefix_caching) {
  if (n_blocks < 0) throw Error("BlockManager: negative block count " + std::to_string(n_blocks));
  const auto n = static_cast<size_t>(n_blocks);
  ref_count_.assign(n, 0);
  indexed_.assign(n, 0);
  key_.assign(n, 0);
  parent_key_.assign(n, 0);
  tokens_.assign(n * kKvBlockSize, 0);
  lru_prev_.assign(n, kNone);
  lru_next_.assign(n, kNone);
  free_.reserve(n);
  for (int32_t id = n_blocks - 1; id >= 0; --id) free_.push_back(id);  // lowest id on top
}

void BlockManager::check_id(int32_t block) const {
  if (block < 0 || block >= n_blocks_) {
    throw Error("BlockManager: block id " + std::to_string(block) + " out of range [0, " +
                std::to_string(n_blocks_) + ")");
  }
}

void BlockManager::lru_push_back(int32_t block) {
  lru_prev_[block] = lru_tail_;
  lru_next_[block] = kNone;
  if (lru_tail_ != kNone) lru_next_[lru_tail_] = block;
  lru_tail_ = block;
  if (lru_head_ == kNone) lru_head_ = block;
  ++n_lru_;
}

void BlockManager::lru_remove(int32_t block) {
  const int32_t prev = lru_prev_[block], next = lru_next_[block];
  (prev != kNone ? lru_next_[prev] : lru_head_) = next;
  (next != kNone ? lru_prev_[next] : lru_tail_) = prev;
  lru_prev_[block] = lru_next_[block] = kNone;
  --n_lru_;
}

void BlockManager::unindex(int32_t block) {
  index_.erase(key_[block]);
  indexed_[block] = 0;
}

int32_t BlockManager::allocate() {
  int32_t block = kNone;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (lru_head_ != kNone) {
    block = lru_head_;  // evict the least recently released cached prefix block
    lru_remove(block);
    unindex(block);
  } else {
    return kNone;
  }
  ref_count_[block] = 1;
  return block;
}

void BlockManager::release(int32_t block) {
  check_id(block);
  if (ref_count_[block] <= 0) {
    throw Error("BlockManager: block " + std::to_string(block) + " released with no reference");
  }
  if (--ref_count_[block] > 0) return;
  if (indexed_[block]) {
    lru_push_back(block);
  } else {
    free_.push_back(block);
  }
}

void BlockManager::acquire(int32_t block) {
  check_id(block);
  if (ref_count_[block] == 0) {
    if (!indexed_[block]) {
      throw Error("BlockManager: acquire of free block " + std::to_string(block) + " (not cached)");
    }
    lru_remove(block);
  }
  ++ref_count_[block];
}

PrefixMatch BlockManager::match_prefix(std::span<const int32_t> tokens, int64_t max_blocks) const {
  PrefixMatch match;
  if (!prefix_caching_) return match;
  const int64_t n_full = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / kKvBlockSize, max_blocks);
  uint64_t parent = kRootBlockKey;
  for (int64_t b = 0; b < n_full; ++b) {
    const auto block_tokens = tokens.subspan(static_cast<size_t>(b * kKvBlockSize), kKvBlockSize);
    const uint64_t key = block_hash(parent, block_tokens);
    const auto it = index_.find(key);
    if (it == index_.end()) break;
    const int32_t block = it->second;
    // Verify: a hash collision must never hand out the KV of other tokens.
    const int32_t* stored = tokens_.data() + static_cast<size_t>(block) * kKvBlockSize;
    if (parent_key_[block] != parent || !std::equal(block_tokens.begin(), block_tokens.end(), stored)) break;
    match.blocks.push_back(block);
    match.keys.push_back(key);
    parent = key;
  }
  return match;
}

int32_t BlockManager::count_unreferenced(std::span<const int32_t> blocks) const {
  int32_t n = 0;
  for (int32_t b : blocks) n += ref_count_[b] == 0 ? 1 : 0;
  return n;
}

uint64_t BlockManager::commit_full_block(int32_t block, uint64_t parent_key,
                                         std::span<const int32_t> tokens) {
  check_id(block);
  if (tokens.size() != static_cast<size_t>(kKvBlockSize)) {
    throw Error("BlockManager: a full block has " + std::to_string(kKvBlockSize) + " tokens, got " +
                std::to_string(tokens.size()));
  }
  const uint64_t key = block_hash(parent_key, tokens);
  if (!prefix_caching_ || indexed_[block] || ref_count_[block] <= 0) return key;
  if (!index_.emplace(key, block).second) return key;  // another block already holds this prefix
  indexed_[block] = 1;
  key_[block] = key;
  parent_key_[block] = parent_key;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(block) * kKvBlockSize);
  return key;
}

}  // namespace qs
