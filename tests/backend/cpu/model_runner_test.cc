// Forward-pass properties that need no reference model: batch invariance (a sequence's logits do
// not depend on what else is in the batch) and paged decode == full prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "backend/cpu/model_runner.h"
#include "support/random_model.h"

namespace qs {
namespace {

std::vector<int32_t> random_tokens(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = dist(rng);
  return ids;
}

// Max |a - b| / max |b| over two logit rows.
double relative_error(const float* a, const float* b, int64_t n) {
  double max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(b[i])));
  }
  return max_diff / max_ref;
}

// Logits of every position of `ids` computed as one prefill in a fresh cache.
std::vector<float> prefill_all(RandomModel& m, KvDType kv, const std::vector<int32_t>& ids,
                               int threads) {
  ThreadPool pool(threads);
  KvCache cache(m.config, kv, 64);
  ModelRunner runner(m.config, m.weights, cache, pool, 128, 256);
  BlockTable table;
  EXPECT_TRUE(table.reserve(static_cast<int32_t>(ids.size()), cache.pool()));
  Batch batch;
  batch.sequences.push_back({&table.blocks()});
  batch.add_tokens(0, ids.data(), static_cast<int64_t>(ids.size()), 0, false);
  for (size_t i = 0; i < ids.size(); ++i) batch.logits_indices.push_back(static_cast<int32_t>(i));
  std::vector<float> logits(ids.size() * m.config.vocab_size);
  runner.forward(batch, logits.data());
  return logits;
}

class ModelRunnerTest : public ::testing::TestWithParam<std::tuple<Architecture, DType, KvDType>> {};

TEST_P(ModelRunnerTest, BatchedMixedPrefillDecodeEqualsAlone) {
  auto [arch, dtype, kv] = GetParam();
  RandomModel m(arch, dtype);
  const int64_t vocab = m.config.vocab_size;
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(37, 300, 1),
                                                  random_tokens(5, 300, 2),
                                                  random_tokens(20, 300, 3)};
  std::vector<std::vector<float>> alone;
  for (const auto& s : seqs) alone.push_back(prefill_all(m, kv, s, 1));

  // Batched, 2 threads: step 1 prefills the first part of every sequence together, then each
  // following step mixes one decode token of some sequences with prefill chunks of others.
  ThreadPool pool(2);
  KvCache cache(m.config, kv, 64);
  ModelRunner runner(m.config, m.weights, cache, pool, 128, 256);
  std::vector<BlockTable> tables(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    ASSERT_TRUE(tables[s].reserve(static_cast<int32_t>(seqs[s].size()), cache.pool()));
  }
  std::vector<int32_t> done(seqs.size(), 0);
  const int chunk_sizes[] = {3, 1, 7};
  auto any_remaining = [&] {
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (static_cast<size_t>(done[s]) < seqs[s].size()) return true;
    }
    return false;
  };
  for (int step = 0; any_remaining(); ++step) {
    Batch batch;
    std::vector<std::pair<size_t, int32_t>> owners;  // (sequence, position) of each logits row
    for (size_t s = 0; s < seqs.size(); ++s) {
      batch.sequences.push_back({&tables[s].blocks()});
      const int32_t n = std::min<int32_t>(chunk_sizes[(s + step) % 3],
                                          static_cast<int32_t>(seqs[s].size()) - done[s]);
      for (int32_t i = 0; i < n; ++i) {
        batch.add_tokens(static_cast<int32_t>(s), &seqs[s][done[s] + i], 1, done[s] + i, true);
        owners.emplace_back(s, done[s] + i);
      }
      done[s] += n;
    }
    std::vector<float> logits(owners.size() * vocab);
    runner.forward(batch, logits.data());
    for (size_t j = 0; j < owners.size(); ++j) {
      const auto [s, pos] = owners[j];
      EXPECT_LE(relative_error(&logits[j * vocab], &alone[s][pos * vocab], vocab), 1e-5)
          << "sequence " << s << " position " << pos << " step " << step;
    }
  }
}

TEST_P(ModelRunnerTest, TokenByTokenDecodeEqualsPrefill) {
  auto [arch, dtype, kv] = GetParam();
  RandomModel m(arch, dtype);
  const int64_t vocab = m.config.vocab_size;
  const auto ids = random_tokens(40, 300, 9);  // crosses two KV block boundaries
  const auto full = prefill_all(m, kv, ids, 2);
  ThreadPool pool(1);
  KvCache cache(m.config, kv, 8);
  ModelRunner runner(m.config, m.weights, cache, pool, 1, 256);
  BlockTable table;
  // Take a block first so the sequence's blocks are not numbered from 0: the block table matters.
  const int32_t spacer = cache.pool().allocate();
  ASSERT_TRUE(table.reserve(40, cache.pool()));
  std::vector<float> logits(vocab);
  for (int32_t pos = 0; pos < 40; ++pos) {
    Batch batch;
    batch.sequences.push_back({&table.blocks()});
    batch.add_tokens(0, &ids[pos], 1, pos, true);
    runner.forward(batch, logits.data());
    EXPECT_LE(relative_error(logits.data(), &full[pos * vocab], vocab), 1e-5) << "position " << pos;
  }
  cache.pool().release(spacer);
}

INSTANTIATE_TEST_SUITE_P(
    ArchDTypeKv, ModelRunnerTest,
    ::testing::Values(std::make_tuple(Architecture::kQwen3, DType::F32, KvDType::kF32),
                      std::make_tuple(Architecture::kQwen3, DType::F16, KvDType::kF16),
                      std::make_tuple(Architecture::kQwen2, DType::F32, KvDType::kF16)));

TEST(ModelRunnerErrors, RejectsBadBatches) {
  RandomModel m(Architecture::kQwen3, DType::F32);
  ThreadPool pool(1);
  KvCache cache(m.config, KvDType::kF32, 4);
  ModelRunner runner(m.config, m.weights, cache, pool, 8, 64);
  BlockTable table;
  ASSERT_TRUE(table.reserve(16, cache.pool()));
  std::vector<float> logits(m.config.vocab_size);
  Batch bad_token;
  bad_token.sequences.push_back({&table.blocks()});
  const int32_t out_of_vocab = 300;
  bad_token.add_tokens(0, &out_of_vocab, 1, 0, true);
  EXPECT_THROW(runner.forward(bad_token, logits.data()), Error);
  Batch uncovered;
  uncovered.sequences.push_back({&table.blocks()});
  const int32_t token = 5;
  uncovered.add_tokens(0, &token, 1, 16, true);  // block table covers positions 0..15 only
  EXPECT_THROW(runner.forward(uncovered, logits.data()), Error);
}

}  // namespace
}  // namespace qs
