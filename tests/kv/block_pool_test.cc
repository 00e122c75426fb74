// KV block bookkeeping: the free list and per-sequence block tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/error.h"
#include "kv/block_pool.h"

namespace qs {
namespace {

TEST(BlockPool, AllocatesEveryBlockOnceThenReportsExhaustion) {
  BlockPool pool(10);
  EXPECT_EQ(pool.n_blocks(), 10);
  EXPECT_EQ(pool.n_free(), 10);
  std::set<int32_t> seen;
  for (int i = 0; i < 10; ++i) {
    const int32_t id = pool.allocate();
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 10);
    EXPECT_TRUE(seen.insert(id).second) << "block " << id << " handed out twice";
    EXPECT_EQ(pool.n_free(), 10 - i - 1);
  }
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.allocate(), -1);  // stays exhausted, counters unchanged
  EXPECT_EQ(pool.n_free(), 0);
}

TEST(BlockPool, EmptyPool) {
  BlockPool pool(0);
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_THROW(pool.release(0), Error);
}

TEST(BlockPool, NegativeSizeThrows) { EXPECT_THROW(BlockPool(-1), Error); }

TEST(BlockPool, ReleaseAndReuse) {
  BlockPool pool(4);
  std::vector<int32_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(pool.allocate());
  ASSERT_EQ(pool.allocate(), -1);

  pool.release(ids[2]);
  EXPECT_EQ(pool.n_free(), 1);
  EXPECT_EQ(pool.allocate(), ids[2]);  // the only free block
  EXPECT_EQ(pool.allocate(), -1);

  pool.release(ids[0]);
  pool.release(ids[3]);
  EXPECT_EQ(pool.n_free(), 2);
  const int32_t a = pool.allocate();
  const int32_t b = pool.allocate();
  EXPECT_EQ(std::set<int32_t>({a, b}), std::set<int32_t>({ids[0], ids[3]}));
  EXPECT_EQ(pool.allocate(), -1);

  for (int32_t id : ids) pool.release(id);
  EXPECT_EQ(pool.n_free(), 4);
}

TEST(BlockPool, DoubleFreeThrowsAndLeavesPoolIntact) {
  BlockPool pool(3);
  const int32_t id = pool.allocate();
  pool.release(id);
  EXPECT_THROW(pool.release(id), Error);
  EXPECT_EQ(pool.n_free(), 3);
  // A never-allocated block is also "already free".
  BlockPool fresh(3);
  EXPECT_THROW(fresh.release(1), Error);
  EXPECT_EQ(fresh.n_free(), 3);
  // After the failed release, the pool still hands out 3 distinct blocks and no more.
  std::set<int32_t> seen;
  for (int i = 0; i < 3; ++i) seen.insert(pool.allocate());
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(pool.allocate(), -1);
}

TEST(BlockPool, OutOfRangeReleaseThrows) {
  BlockPool pool(3);
  pool.allocate();
  EXPECT_THROW(pool.release(-1), Error);
  EXPECT_THROW(pool.release(3), Error);
  EXPECT_THROW(pool.release(1000000), Error);
  EXPECT_EQ(pool.n_free(), 2);
}

TEST(BlockPool, TableReserveGrowsByWholeBlocksOf16) {
  ASSERT_EQ(kKvBlockSize, 16);
  BlockPool pool(10);
  BlockTable table;
  EXPECT_TRUE(table.blocks().empty());
  EXPECT_EQ(table.capacity_tokens(), 0);

  EXPECT_TRUE(table.reserve(0, pool));
  EXPECT_EQ(table.blocks().size(), 0u);

  struct Step {
    int32_t n_tokens;
    size_t expected_blocks;
  };
  // ceil(n / 16) blocks; shrinking requests never release blocks.
  const Step steps[] = {{1, 1}, {16, 1}, {17, 2}, {32, 2}, {33, 3}, {5, 3}, {48, 3}, {49, 4}, {100, 7}};
  for (const Step& s : steps) {
    ASSERT_TRUE(table.reserve(s.n_tokens, pool)) << s.n_tokens;
    EXPECT_EQ(table.blocks().size(), s.expected_blocks) << "n_tokens " << s.n_tokens;
    EXPECT_EQ(table.capacity_tokens(), static_cast<int32_t>(s.expected_blocks) * 16);
    EXPECT_EQ(pool.n_free(), 10 - static_cast<int32_t>(s.expected_blocks));
  }
  // Blocks are distinct and in range.
  std::set<int32_t> ids(table.blocks().begin(), table.blocks().end());
  EXPECT_EQ(ids.size(), table.blocks().size());
  EXPECT_GE(*ids.begin(), 0);
  EXPECT_LT(*ids.rbegin(), 10);
}

TEST(BlockPool, TableReserveKeepsExistingBlocksInOrder) {
  BlockPool pool(8);
  BlockTable table;
  ASSERT_TRUE(table.reserve(20, pool));
  const std::vector<int32_t> before = table.blocks();
  ASSERT_TRUE(table.reserve(70, pool));
  ASSERT_EQ(table.blocks().size(), 5u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), table.blocks().begin()));
}

TEST(BlockPool, TableReserveFailureLeavesTableAndPoolUnchanged) {
  BlockPool pool(5);
  BlockTable other;
  ASSERT_TRUE(other.reserve(16 * 2, pool));  // 3 blocks left
  BlockTable table;
  ASSERT_TRUE(table.reserve(10, pool));      // 2 left
  const std::vector<int32_t> before = table.blocks();

  EXPECT_FALSE(table.reserve(16 * 4, pool));  // needs 3 more, only 2 free
  EXPECT_EQ(table.blocks(), before);
  EXPECT_EQ(pool.n_free(), 2);

  EXPECT_TRUE(table.reserve(16 * 3, pool));   // exactly 2 more fit
  EXPECT_EQ(table.blocks().size(), 3u);
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_FALSE(table.reserve(16 * 3 + 1, pool));
  EXPECT_EQ(table.blocks().size(), 3u);
  EXPECT_TRUE(table.reserve(16 * 3, pool));   // already covered: no allocation needed
}

TEST(BlockPool, ReleaseAllReturnsEveryBlock) {
  BlockPool pool(12);
  BlockTable a, b;
  ASSERT_TRUE(a.reserve(70, pool));  // 5 blocks
  ASSERT_TRUE(b.reserve(33, pool));  // 3 blocks
  EXPECT_EQ(pool.n_free(), 4);
  a.release_all(pool);
  EXPECT_TRUE(a.blocks().empty());
  EXPECT_EQ(a.capacity_tokens(), 0);
  EXPECT_EQ(pool.n_free(), 9);
  b.release_all(pool);
  EXPECT_EQ(pool.n_free(), pool.n_blocks());
  // Releasing an empty table is a no-op.
  a.release_all(pool);
  EXPECT_EQ(pool.n_free(), pool.n_blocks());
  // The whole pool can be taken again by one table.
  BlockTable c;
  EXPECT_TRUE(c.reserve(12 * 16, pool));
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_FALSE(BlockTable().reserve(1, pool));
  c.release_all(pool);
  EXPECT_EQ(pool.n_free(), 12);
}

}  // namespace
}  // namespace qs
