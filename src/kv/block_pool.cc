#include "kv/block_pool.h"

#include <string>

#include "core/error.h"

namespace qs {

namespace {

// Checked before any member is sized from the count: a negative count would otherwise reach
// std::vector's size constructor and throw std::length_error instead of qs::Error.
int32_t checked_block_count(int32_t n_blocks) {
  if (n_blocks < 0) throw Error("BlockPool: negative block count " + std::to_string(n_blocks));
  return n_blocks;
}

}  // namespace

BlockPool::BlockPool(int32_t n_blocks)
    : n_blocks_(checked_block_count(n_blocks)), is_free_(static_cast<size_t>(n_blocks_), 1) {
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t id = n_blocks - 1; id >= 0; --id) free_.push_back(id);
}

int32_t BlockPool::allocate() {
  if (free_.empty()) return -1;
  const int32_t id = free_.back();
  free_.pop_back();
  is_free_[id] = 0;
  return id;
}

void BlockPool::release(int32_t block_id) {
  if (block_id < 0 || block_id >= n_blocks_) {
    throw Error("BlockPool: block id " + std::to_string(block_id) + " out of range");
  }
  if (is_free_[block_id]) throw Error("BlockPool: block " + std::to_string(block_id) + " freed twice");
  is_free_[block_id] = 1;
  free_.push_back(block_id);
}

bool BlockTable::reserve(int32_t n_tokens, BlockPool& pool) {
  const size_t needed = static_cast<size_t>((n_tokens + kKvBlockSize - 1) / kKvBlockSize);
  if (needed <= blocks_.size()) return true;
  if (static_cast<size_t>(pool.n_free()) < needed - blocks_.size()) return false;
  while (blocks_.size() < needed) blocks_.push_back(pool.allocate());
  return true;
}

void BlockTable::release_all(BlockPool& pool) {
  for (int32_t id : blocks_) pool.release(id);
  blocks_.clear();
}

}  // namespace qs
