// Forward-pass properties that need no reference model: batch invariance (a sequence's logits do
// not depend on what else is in the batch) and paged decode == full prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "support/backend_test_support.h"
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

std::unique_ptr<CpuBackend> make_backend(RandomModel& m, KvDType kv, int32_t n_blocks, int64_t max_batch,
                                         int threads) {
  auto backend = std::make_unique<CpuBackend>(CpuBackendOptions{threads, false, 0});
  backend->prepare(m.config, m.weights, BackendLimits{max_batch, 256, 16});
  backend->allocate_kv(n_blocks, kv);
  return backend;
}

// Logits of every position of `ids` computed as one prefill in a fresh cache.
std::vector<float> prefill_all(RandomModel& m, KvDType kv, const std::vector<int32_t>& ids,
                               int threads) {
  auto backend = make_backend(m, kv, 64, 128, threads);
  const auto n = static_cast<int32_t>(ids.size());
  return step_logits(*backend, {{ids, 0, block_range(0, (n + 15) / 16), n}});
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
  auto backend = make_backend(m, kv, 64, 128, 2);
  std::vector<std::vector<int32_t>> tables(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) tables[s] = block_range(static_cast<int32_t>(s) * 8, 3);
  std::vector<int32_t> done(seqs.size(), 0);
  const int chunk_sizes[] = {3, 1, 7};
  auto any_remaining = [&] {
    for (size_t s = 0; s < seqs.size(); ++s) {
      if (static_cast<size_t>(done[s]) < seqs[s].size()) return true;
    }
    return false;
  };
  for (int step = 0; any_remaining(); ++step) {
    std::vector<TestChunk> chunks;
    std::vector<std::pair<size_t, int32_t>> owners;  // (sequence, position) of each logits row
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int32_t n = std::min<int32_t>(chunk_sizes[(s + step) % 3],
                                          static_cast<int32_t>(seqs[s].size()) - done[s]);
      if (n == 0) continue;
      chunks.push_back({std::vector<int32_t>(seqs[s].begin() + done[s], seqs[s].begin() + done[s] + n), done[s],
                        tables[s], n, s});
      for (int32_t i = 0; i < n; ++i) owners.emplace_back(s, done[s] + i);
      done[s] += n;
    }
    const std::vector<float> logits = step_logits(*backend, chunks);
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
  auto backend = make_backend(m, kv, 8, 1, 1);
  // Blocks not numbered from 0 and not in order: the block table matters.
  const std::vector<int32_t> table = {6, 1, 4};
  for (int32_t pos = 0; pos < 40; ++pos) {
    const std::vector<float> logits = step_logits(*backend, {{{ids[pos]}, pos, table, 1}});
    EXPECT_LE(relative_error(logits.data(), &full[pos * vocab], vocab), 1e-5) << "position " << pos;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ArchDTypeKv, ModelRunnerTest,
    ::testing::Values(std::make_tuple(Architecture::kQwen3, DType::F32, KvDType::kF32),
                      std::make_tuple(Architecture::kQwen3, DType::F16, KvDType::kF16),
                      std::make_tuple(Architecture::kQwen2, DType::F32, KvDType::kF16)));

TEST(ModelRunnerErrors, RejectsBadBatches) {
  RandomModel m(Architecture::kQwen3, DType::F32);
  auto backend = std::make_unique<CpuBackend>(CpuBackendOptions{1, false, 0});
  backend->prepare(m.config, m.weights, BackendLimits{8, 64, 4});
  backend->allocate_kv(4, KvDType::kF32);
  EXPECT_THROW(step_logits(*backend, {{{300}, 0, {0}, 1}}), Error);          // token outside the vocabulary
  EXPECT_THROW(step_logits(*backend, {{{5}, 16, {0}, 1}}), Error);           // table covers 0..15 only
  EXPECT_THROW(step_logits(*backend, {{{5}, 0, {4}, 1}}), Error);            // block id outside the cache
  EXPECT_THROW(step_logits(*backend, {{{5}, 64, {0, 1, 2, 3, 0}, 1}}), Error);  // beyond the context
  EXPECT_THROW(step_logits(*backend, {{std::vector<int32_t>(9, 1), 0, {0}, 1}}), Error);  // > max_batch_tokens
}

}  // namespace
}  // namespace qs
