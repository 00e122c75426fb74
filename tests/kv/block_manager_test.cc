// BlockManager: reference counts, prefix index with verification, LRU eviction only when needed;
// parse_byte_size / kv_blocks_for_budget.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "core/error.h"
#include "kv/block_manager.h"
#include "kv/kv_budget.h"

namespace qs {
namespace {

std::vector<int32_t> iota_tokens(size_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Commits the full blocks of `tokens` held in `blocks` and returns their keys.
std::vector<uint64_t> commit_all(BlockManager& m, const std::vector<int32_t>& blocks, const std::vector<int32_t>& tokens) {
  std::vector<uint64_t> keys;
  uint64_t parent = kRootBlockKey;
  for (size_t b = 0; b < blocks.size(); ++b) {
    parent = m.commit_full_block(blocks[b], parent, std::span(tokens).subspan(b * kKvBlockSize, kKvBlockSize));
    keys.push_back(parent);
  }
  return keys;
}

TEST(BlockManager, AllocatesEveryBlockOnceAndCountsReferences) {
  BlockManager m(6, true);
  std::set<int32_t> seen;
  for (int i = 0; i < 6; ++i) {
    const int32_t b = m.allocate();
    ASSERT_GE(b, 0);
    EXPECT_TRUE(seen.insert(b).second);
  }
  EXPECT_EQ(m.allocate(), -1);
  EXPECT_EQ(m.n_referenced(), 6);
  EXPECT_EQ(m.n_allocatable(), 0);
  for (int32_t b : seen) m.release(b);
  EXPECT_EQ(m.n_allocatable(), 6);
  EXPECT_THROW(m.release(*seen.begin()), Error);  // no reference left
  EXPECT_THROW(m.release(6), Error);
  EXPECT_THROW(m.acquire(0), Error);  // free and not cached
  EXPECT_THROW(BlockManager(-1, true), Error);
}

TEST(BlockManager, MatchesTheLongestCommittedPrefixAndSharesIt) {
  BlockManager m(8, true);
  const std::vector<int32_t> tokens = iota_tokens(3 * kKvBlockSize + 5, 100);
  std::vector<int32_t> blocks = {m.allocate(), m.allocate(), m.allocate()};
  const std::vector<uint64_t> keys = commit_all(m, blocks, tokens);
  EXPECT_EQ(m.n_indexed(), 3);

  PrefixMatch hit = m.match_prefix(tokens, 10);
  EXPECT_EQ(hit.blocks, blocks);
  EXPECT_EQ(hit.keys, keys);
  EXPECT_EQ(hit.n_tokens(), 3 * kKvBlockSize);
  EXPECT_EQ(m.match_prefix(tokens, 2).blocks.size(), 2u);  // capped by max_blocks

  // A different second block: only the first matches. A different first token: nothing.
  std::vector<int32_t> other = tokens;
  other[kKvBlockSize + 3] = 7;
  EXPECT_EQ(m.match_prefix(other, 10).blocks, std::vector<int32_t>{blocks[0]});
  other[0] = 7;
  EXPECT_TRUE(m.match_prefix(other, 10).blocks.empty());
  // Same tokens of block 1 but after a different block 0 (another parent key): no match there.
  std::vector<int32_t> shifted(tokens.begin() + kKvBlockSize, tokens.end());
  EXPECT_TRUE(m.match_prefix(shifted, 10).blocks.empty());

  // Sharing: acquire adds a reference; the block stays held until both release it.
  m.acquire(blocks[0]);
  m.release(blocks[0]);
  EXPECT_EQ(m.n_referenced(), 3);
  for (int32_t b : blocks) m.release(b);
  EXPECT_EQ(m.n_referenced(), 0);
  EXPECT_EQ(m.n_cached_unreferenced(), 3);
  EXPECT_EQ(m.n_allocatable(), 8);
  // Still matchable after release; acquiring takes it off the LRU list.
  hit = m.match_prefix(tokens, 10);
  ASSERT_EQ(hit.blocks.size(), 3u);
  EXPECT_EQ(m.count_unreferenced(hit.blocks), 3);
  m.acquire(hit.blocks[0]);
  EXPECT_EQ(m.n_cached_unreferenced(), 2);
  EXPECT_EQ(m.n_referenced(), 1);
}

TEST(BlockManager, EvictsCachedBlocksOnlyWhenNoFreeBlockIsLeftInLruOrder) {
  BlockManager m(4, true);
  const std::vector<int32_t> a = iota_tokens(kKvBlockSize, 0), b = iota_tokens(kKvBlockSize, 500);
  const int32_t block_a = m.allocate(), block_b = m.allocate();
  m.commit_full_block(block_a, kRootBlockKey, a);
  m.commit_full_block(block_b, kRootBlockKey, b);
  m.release(block_a);  // released first: least recently used
  m.release(block_b);
  // Two never-cached blocks are handed out before any cached one is evicted.
  const int32_t x = m.allocate(), y = m.allocate();
  EXPECT_TRUE(x != block_a && x != block_b && y != block_a && y != block_b);
  EXPECT_EQ(m.match_prefix(a, 1).blocks.size(), 1u);
  EXPECT_EQ(m.match_prefix(b, 1).blocks.size(), 1u);
  // Now the LRU head (a) goes first, and its prefix is forgotten.
  EXPECT_EQ(m.allocate(), block_a);
  EXPECT_TRUE(m.match_prefix(a, 1).blocks.empty());
  EXPECT_EQ(m.match_prefix(b, 1).blocks.size(), 1u);
  EXPECT_EQ(m.allocate(), block_b);
  EXPECT_EQ(m.allocate(), -1);
  EXPECT_EQ(m.n_indexed(), 0);
}

TEST(BlockManager, DuplicatePrefixKeepsTheFirstBlockAndFreesTheSecond) {
  BlockManager m(4, true);
  const std::vector<int32_t> t = iota_tokens(kKvBlockSize, 9);
  const int32_t first = m.allocate(), second = m.allocate();
  const uint64_t k1 = m.commit_full_block(first, kRootBlockKey, t);
  const uint64_t k2 = m.commit_full_block(second, kRootBlockKey, t);
  EXPECT_EQ(k1, k2);
  EXPECT_EQ(m.n_indexed(), 1);
  m.release(second);
  EXPECT_EQ(m.n_cached_unreferenced(), 0);  // the duplicate went to the plain free list
  EXPECT_EQ(m.match_prefix(t, 1).blocks, std::vector<int32_t>{first});
}

TEST(BlockManager, DisabledPrefixCachingNeverMatches) {
  BlockManager m(4, false);
  const std::vector<int32_t> t = iota_tokens(kKvBlockSize, 1);
  const int32_t b = m.allocate();
  m.commit_full_block(b, kRootBlockKey, t);
  m.release(b);
  EXPECT_TRUE(m.match_prefix(t, 1).blocks.empty());
  EXPECT_EQ(m.n_cached_unreferenced(), 0);
  EXPECT_EQ(m.n_allocatable(), 4);
}

TEST(BlockHash, DependsOnParentAndEveryToken) {
  const std::vector<int32_t> t = iota_tokens(kKvBlockSize, 0);
  std::set<uint64_t> keys = {block_hash(kRootBlockKey, t)};
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<int32_t> u = t;
    u[i] += 1;
    keys.insert(block_hash(kRootBlockKey, u));
  }
  keys.insert(block_hash(kRootBlockKey + 1, t));
  EXPECT_EQ(keys.size(), t.size() + 2);
}

TEST(KvBudget, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("1024"), 1024u);
  EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("2gib"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("4GB"), 4000000000ull);
  EXPECT_EQ(parse_byte_size("1.5K"), 1536u);
  EXPECT_EQ(parse_byte_size("10B"), 10u);
  for (const char* bad : {"", "GiB", "-1", "1.2.3G", "12 parsecs", "1e3"}) {
    EXPECT_THROW(parse_byte_size(bad), Error) << bad;
  }
}

TEST(KvBudget, BlocksForBudget) {
  KvBudgetInput in;
  in.bytes_per_block = 1000;
  in.ctx_tokens = 160;  // 10 blocks per context
  in.max_num_seqs = 4;  // 40 blocks for all
  in.available_bytes = 1'000'000;
  EXPECT_EQ(kv_blocks_for_budget(in), 40);  // capped at what 4 contexts need
  in.available_bytes = 4 * 25'000;           // a quarter is 25 blocks
  EXPECT_EQ(kv_blocks_for_budget(in), 25);
  in.available_bytes = 4 * 3'000;            // never below one context
  EXPECT_EQ(kv_blocks_for_budget(in), 10);
  in.budget_bytes = 7'500;                   // explicit: floor(7500 / 1000)
  EXPECT_EQ(kv_blocks_for_budget(in), 7);
  in.budget_bytes = 999;
  EXPECT_THROW(kv_blocks_for_budget(in), Error);
}

}  // namespace
}  // namespace qs
