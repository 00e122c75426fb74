// Host-side planning of the CUDA backend (backend/cuda/step_plan.h) and its Philox generator
// (backend/cuda/philox.h): plain C++, run on the CPU in every build.
#include "backend/cuda/step_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cuda/philox.h"
#include "core/error.h"

namespace qs::cuda_plan {
namespace {

TEST(CudaGraphBuckets, SizesFollowTheCaptureList) {
  EXPECT_EQ(graph_buckets(128), (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128}));
  EXPECT_EQ(graph_buckets(256), (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  // max_seqs that is no bucket is the last one; nothing above it.
  EXPECT_EQ(graph_buckets(40), (std::vector<int32_t>{1, 2, 4, 8, 16, 24, 32, 40}));
  EXPECT_EQ(graph_buckets(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(graph_buckets(3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_THROW(graph_buckets(0), Error);
}

TEST(CudaGraphBuckets, BucketForPadsUpToTheNextSize) {
  const std::vector<int32_t> b = graph_buckets(128);
  EXPECT_EQ(bucket_for(b, 1), 1);
  EXPECT_EQ(bucket_for(b, 3), 4);
  EXPECT_EQ(bucket_for(b, 17), 24);
  EXPECT_EQ(bucket_for(b, 33), 48);
  EXPECT_EQ(bucket_for(b, 97), 128);
  EXPECT_EQ(bucket_for(b, 128), 128);
  EXPECT_EQ(bucket_for(b, 129), -1);  // eager
}

TEST(CudaKvSplits, FewItemsSplitLongContexts) {
  // batch 1, 8 KV heads, 132 SMs (H100/H200): 264 blocks wanted, 8 items -> 33 splits, capped 16.
  KvSplitPlan p = plan_kv_splits(1, 8, 4096, 132);
  EXPECT_EQ(p.n_splits, 16);
  EXPECT_EQ(p.blocks_per_split, 16);  // 256 blocks / 16
  // Context 17 tokens = 2 blocks: at most 2 splits of one block.
  p = plan_kv_splits(1, 8, 17, 132);
  EXPECT_EQ(p.n_splits, 2);
  EXPECT_EQ(p.blocks_per_split, 1);
  // Context 16 = exactly one block.
  p = plan_kv_splits(1, 8, 16, 132);
  EXPECT_EQ(p.n_splits, 1);
  // Enough items: no split.
  p = plan_kv_splits(64, 8, 4096, 132);
  EXPECT_EQ(p.n_splits, 1);
  EXPECT_EQ(p.blocks_per_split, 256);
}

TEST(CudaKvSplits, EverySplitOfTheLongestContextIsNonEmpty) {
  for (int32_t ctx : {1, 15, 16, 17, 100, 513, 4095, 4096, 40000}) {
    for (int32_t items : {1, 3, 8, 64}) {
      const KvSplitPlan p = plan_kv_splits(items, 1, ctx, 132);
      const int32_t blocks = (ctx + 15) / 16;
      EXPECT_GE(p.n_splits * p.blocks_per_split, blocks) << ctx;          // covers the context
      EXPECT_LT((p.n_splits - 1) * p.blocks_per_split, blocks) << ctx;    // last split non-empty
      EXPECT_LE(p.n_splits, 16);
    }
  }
  EXPECT_THROW(plan_kv_splits(0, 8, 16, 132), Error);
}

// Two sequences: A (3 tokens at positions 14..16, blocks {5, 2}), B (1 token at position 0, block {7}).
StepBatch two_sequences() {
  StepBatchBuilder builder;
  builder.clear();
  const std::vector<int32_t> a = {11, 12, 13}, b = {21};
  const std::vector<int32_t> ta = {5, 2}, tb = {7};
  builder.add_sequence(a, 14, ta, 1);
  builder.add_sequence(b, 0, tb, 1);
  StepBatch batch;
  builder.build(batch);
  return batch;
}

TEST(CudaPackStep, PaddedRowsWriteNoKvAndReadNoContext) {
  const StepBatch batch = two_sequences();
  std::vector<int32_t> out;
  const PackedLayout l = pack_step(batch, PackPadding{.tokens = 8}, out);
  ASSERT_EQ(out.size(), l.total);
  EXPECT_EQ(l.total, 5u * 8 + 2 * 2 + 2);
  const std::vector<int32_t> ids(out.begin() + l.token_ids, out.begin() + l.token_ids + 8);
  EXPECT_EQ(ids, (std::vector<int32_t>{11, 12, 13, 21, 0, 0, 0, 0}));
  const std::vector<int32_t> slots(out.begin() + l.slot_mapping, out.begin() + l.slot_mapping + 8);
  // position 14, 15 in block 5 (slots 94, 95); position 16 in block 2 (slot 32); B at block 7.
  EXPECT_EQ(slots, (std::vector<int32_t>{94, 95, 32, 112, -1, -1, -1, -1}));
  const std::vector<int32_t> seq(out.begin() + l.token_seq, out.begin() + l.token_seq + 8);
  EXPECT_EQ(seq, (std::vector<int32_t>{0, 0, 0, 1, 0, 0, 0, 0}));
  const std::vector<int32_t> ctx(out.begin() + l.context_lens, out.begin() + l.context_lens + 8);
  EXPECT_EQ(ctx, (std::vector<int32_t>{15, 16, 17, 1, 0, 0, 0, 0}));
  const std::vector<int32_t> tables(out.begin() + l.block_tables, out.begin() + l.logits_indices);
  EXPECT_EQ(tables, (std::vector<int32_t>{5, 2, 7, -1}));
  const std::vector<int32_t> logits(out.begin() + l.logits_indices, out.end());
  EXPECT_EQ(logits, (std::vector<int32_t>{2, 3}));
  EXPECT_THROW(pack_step(batch, PackPadding{.tokens = 3}, out), Error);
  EXPECT_FALSE(is_decode_step(batch));
}

// A decode step of 3 sequences padded to graph bucket 4, tables widened to 3 blocks.
TEST(CudaPackStep, DecodeBucketPadsSequencesTablesAndLogits) {
  StepBatchBuilder builder;
  builder.clear();
  const std::vector<int32_t> t1 = {4}, t2 = {9, 1}, t3 = {3};
  builder.add_sequence(std::vector<int32_t>{100}, 3, t1, 1);
  builder.add_sequence(std::vector<int32_t>{101}, 20, t2, 1);
  builder.add_sequence(std::vector<int32_t>{102}, 0, t3, 1);
  StepBatch batch;
  builder.build(batch);
  ASSERT_TRUE(is_decode_step(batch));
  std::vector<int32_t> out;
  const PackedLayout l = pack_step(batch, PackPadding{.tokens = 4, .seqs = 4, .table_width = 3, .logits = 4}, out);
  EXPECT_EQ(l.total, 5u * 4 + 4 * 3 + 4);
  const std::vector<int32_t> tables(out.begin() + l.block_tables, out.begin() + l.logits_indices);
  EXPECT_EQ(tables, (std::vector<int32_t>{4, -1, -1, 9, 1, -1, 3, -1, -1, -1, -1, -1}));
  const std::vector<int32_t> ctx(out.begin() + l.context_lens, out.begin() + l.context_lens + 4);
  EXPECT_EQ(ctx, (std::vector<int32_t>{4, 21, 1, 0}));
  const std::vector<int32_t> slots(out.begin() + l.slot_mapping, out.begin() + l.slot_mapping + 4);
  EXPECT_EQ(slots, (std::vector<int32_t>{67, 20, 48, -1}));
  const std::vector<int32_t> logits(out.begin() + l.logits_indices, out.end());
  EXPECT_EQ(logits, (std::vector<int32_t>{0, 1, 2, 0}));
  EXPECT_THROW(pack_step(batch, PackPadding{.tokens = 4, .seqs = 4, .table_width = 1}, out), Error);
}

TEST(CudaValidateStep, RefusesWhatAKernelWouldMisindex) {
  const StepBatch batch = two_sequences();
  StepLimits ok{.vocab_size = 100, .max_batch_tokens = 8, .max_context_tokens = 64, .max_seqs = 4, .kv_blocks = 8};
  EXPECT_NO_THROW(validate_step(batch, ok));
  StepLimits l = ok;
  l.vocab_size = 21;  // token 21 outside
  EXPECT_THROW(validate_step(batch, l), Error);
  l = ok;
  l.kv_blocks = 7;  // block 7 outside
  EXPECT_THROW(validate_step(batch, l), Error);
  l = ok;
  l.max_batch_tokens = 3;
  EXPECT_THROW(validate_step(batch, l), Error);
  l = ok;
  l.max_seqs = 1;
  EXPECT_THROW(validate_step(batch, l), Error);
  l = ok;
  l.max_context_tokens = 16;  // position 16 outside
  EXPECT_THROW(validate_step(batch, l), Error);
}

TEST(CudaKvCacheBlocks, FollowsGpuMemoryUtilization) {
  const size_t gib = size_t{1} << 30;
  // 80 GiB card, 10 GiB in use: 0.9 * 80 - 10 = 62 GiB for KV; 1 MiB per block.
  EXPECT_EQ(kv_cache_blocks(80 * gib, 70 * gib, 0.9, size_t{1} << 20), 62 * 1024);
  // Scratch still to allocate comes off too.
  EXPECT_EQ(kv_cache_blocks(80 * gib, 70 * gib, 0.9, size_t{1} << 20, 2 * gib), 60 * 1024);
  // More in use than allowed: nothing.
  EXPECT_EQ(kv_cache_blocks(80 * gib, 5 * gib, 0.9, size_t{1} << 20), 0);
  EXPECT_THROW(kv_cache_blocks(80 * gib, 70 * gib, 0.0, 1), Error);
  EXPECT_THROW(kv_cache_blocks(80 * gib, 70 * gib, 1.5, 1), Error);
  EXPECT_THROW(kv_cache_blocks(80 * gib, 70 * gib, 0.5, 0), Error);
}

// Random123 kat_vectors, philox4x32 10 rounds.
TEST(CudaPhilox, KnownAnswerVectors) {
  philox::Block out = philox::philox4x32_10(philox::Block{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(out.v[0], 0x6627e8d5u);
  EXPECT_EQ(out.v[1], 0xe169c58du);
  EXPECT_EQ(out.v[2], 0xbc57ac4cu);
  EXPECT_EQ(out.v[3], 0x9b00dbd8u);
  out = philox::philox4x32_10(philox::Block{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu,
                              0xffffffffu);
  EXPECT_EQ(out.v[0], 0x408f276du);
  EXPECT_EQ(out.v[1], 0x41c83b0eu);
  EXPECT_EQ(out.v[2], 0xa20bc7c6u);
  EXPECT_EQ(out.v[3], 0x6d5451fdu);
  out = philox::philox4x32_10(philox::Block{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u,
                              0x299f31d0u);
  EXPECT_EQ(out.v[0], 0xd16cfe09u);
  EXPECT_EQ(out.v[1], 0x94fdccebu);
  EXPECT_EQ(out.v[2], 0x5001e420u);
  EXPECT_EQ(out.v[3], 0x24126ea1u);
}

TEST(CudaPhilox, UniformIsInRangeAndNamedBySeedAndDraw) {
  double sum = 0;
  for (uint64_t d = 0; d < 4096; ++d) {
    const double u = philox::uniform(42, d);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 4096, 0.5, 0.02);  // mean of 4096 uniforms: sd 0.0045
  EXPECT_EQ(philox::uniform(7, 3), philox::uniform(7, 3));
  EXPECT_NE(philox::uniform(7, 3), philox::uniform(7, 4));
  EXPECT_NE(philox::uniform(7, 3), philox::uniform(8, 3));
}

}  // namespace
}  // namespace qs::cuda_plan
