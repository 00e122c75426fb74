// Backend conformance, forward pass and KV (issue 10 item 7): every registered backend, through the
// Backend interface only, against the float64 reference (tests/support/reference_forward.h) and
// against recomputes of itself, with the tolerances it declares (tests/support/backend_conformance.h).
// Sampling and errors: conformance_sampling_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "backend/factory/backend_factory.h"
#include "core/error.h"
#include "support/backend_conformance.h"
#include "support/reference_forward.h"

namespace qs {
namespace {

class BackendConformance : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& name() const { return GetParam(); }
  BackendTolerances tol() const { return tolerances_for(name()); }
  std::unique_ptr<Backend> backend(const RandomModel& m, KvDType kv, int32_t n_blocks = 32, int threads = 2) const {
    return conformance_backend(name(), m, kv, n_blocks, BackendLimits{128, 256, 16}, threads);
  }
  // Logits of every position of `ids` as one prefill into a fresh backend (blocks 0, 1, ...).
  std::vector<float> prefill_all(const RandomModel& m, KvDType kv, const std::vector<int32_t>& ids,
                                 int threads = 2) const {
    auto b = backend(m, kv, 32, threads);
    const auto n = static_cast<int32_t>(ids.size());
    return step_logits(*b, {{ids, 0, block_range(0, (n + kKvBlockSize - 1) / kKvBlockSize), n}});
  }
  // Expects every row of `logits` ([ids.size(), vocab]) within `bound` of the float64 reference.
  void expect_near_reference(const RandomModel& m, const std::vector<int32_t>& ids, const std::vector<float>& logits,
                             double bound, const std::string& what) const {
    const std::vector<double> ref = reference::logits(m.config, m.weights, ids);
    const int64_t vocab = m.config.vocab_size;
    ASSERT_EQ(logits.size(), ref.size()) << what;
    double worst = 0;
    for (size_t r = 0; r < ids.size(); ++r) {
      const double err = row_relative_error(&logits[r * vocab], &ref[r * vocab], vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, bound) << what << ": position " << r;
    }
    std::cout << "[ measured ] " << name() << " " << what << ": worst relative error " << worst << " (bound " << bound
              << ")\n";
  }
};

// Case 1: one prefill of 40 tokens (three KV blocks) per architecture, F32 weights and KV, every
// row against the float64 reference.
TEST_P(BackendConformance, LogitsMatchFloat64Reference) {
  for (Architecture arch : {Architecture::kQwen3, Architecture::kQwen2}) {
    RandomModel m(arch, DType::F32);
    const auto ids = conformance_tokens(40, 300, 11);
    expect_near_reference(m, ids, prefill_all(m, KvDType::kF32, ids), tol().logits_rel,
                          architecture_name(arch) + " f32");
  }
}

// Case 6: each KV dtype against the float64 reference, bound logits_rel + kv_factor * roundoff;
// the storage is the declared bytes per block; q8_0 refuses a head_dim that is not a multiple of 32.
TEST_P(BackendConformance, KvDTypesMatchFloat64Reference) {
  for (Architecture arch : {Architecture::kQwen3, Architecture::kQwen2}) {
    RandomModel m(arch, DType::F32);
    const auto ids = conformance_tokens(40, 300, 12);
    for (KvDType kv : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kQ8_0}) {
      const std::string what = architecture_name(arch) + " kv " + kv_name(kv);
      if (m.config.head_dim % 32 != 0 && kv == KvDType::kQ8_0) {
        auto b = make_backend(BackendOptions{name(), 1, false, 0});
        b->prepare(m.config, m.weights, BackendLimits{128, 256, 16});
        EXPECT_THROW(b->allocate_kv(4, kv), Error) << what;
        continue;
      }
      auto b = backend(m, kv, 5);
      EXPECT_EQ(b->kv_blocks(), 5) << what;
      EXPECT_EQ(b->kv_allocated_bytes(), 5 * b->kv_bytes_per_block(kv)) << what;
      EXPECT_GT(b->kv_bytes_per_block(kv), 0u) << what;
      const std::vector<float> logits = step_logits(*b, {{ids, 0, {4, 0, 2}, 40}});
      expect_near_reference(m, ids, logits, tol().logits_rel + tol().kv_factor * kv_unit_roundoff(kv), what);
    }
  }
}

// Case 2: sequences computed together, in chunks of varying sizes mixed with other sequences'
// prefill and decode tokens, on another thread count, give the logits of each sequence alone.
TEST_P(BackendConformance, BatchCompositionAndChunkingDoNotChangeLogits) {
  if (tol().exact_paths) {
    EXPECT_TRUE(make_backend(BackendOptions{name(), 1, false, 0})->batch_invariant());
  }
  struct Setup { Architecture arch; DType weights; KvDType kv; };
  for (const Setup& setup : {Setup{Architecture::kQwen3, DType::F32, KvDType::kF32},
                             Setup{Architecture::kQwen3, DType::F16, KvDType::kF16},
                             Setup{Architecture::kQwen2, DType::F32, KvDType::kBF16}}) {
    RandomModel m(setup.arch, setup.weights);
    const int64_t vocab = m.config.vocab_size;
    const std::vector<std::vector<int32_t>> seqs = {conformance_tokens(37, 300, 1), conformance_tokens(5, 300, 2),
                                                    conformance_tokens(20, 300, 3)};
    std::vector<std::vector<float>> alone;
    for (const auto& s : seqs) alone.push_back(prefill_all(m, setup.kv, s, 1));

    auto b = backend(m, setup.kv, 32, 2);
    const std::vector<std::vector<int32_t>> tables = {{9, 3, 17}, {0}, {30, 12}};
    std::vector<int32_t> done(seqs.size(), 0);
    const int chunk_sizes[] = {3, 1, 7};
    std::vector<std::vector<float>> batched(seqs.size());
    for (int step = 0; step < 64; ++step) {
      std::vector<TestChunk> chunks;
      std::vector<size_t> owners;  // sequence of each logits row
      for (size_t s = 0; s < seqs.size(); ++s) {
        const int32_t n = std::min<int32_t>(chunk_sizes[(s + step) % 3], static_cast<int32_t>(seqs[s].size()) - done[s]);
        if (n == 0) continue;
        chunks.push_back({std::vector<int32_t>(seqs[s].begin() + done[s], seqs[s].begin() + done[s] + n), done[s],
                          tables[s], n, s});
        owners.insert(owners.end(), static_cast<size_t>(n), s);
        done[s] += n;
      }
      if (chunks.empty()) break;
      // Reverse the order of the sequences on odd steps: position in the batch must not matter.
      if (step % 2 == 1) std::reverse(chunks.begin(), chunks.end());
      if (step % 2 == 1) {
        std::vector<size_t> reordered;
        for (const TestChunk& c : chunks) reordered.insert(reordered.end(), c.tokens.size(), c.seq_id);
        owners = reordered;
      }
      const std::vector<float> logits = step_logits(*b, chunks);
      for (size_t j = 0; j < owners.size(); ++j) {
        batched[owners[j]].insert(batched[owners[j]].end(), logits.begin() + j * vocab, logits.begin() + (j + 1) * vocab);
      }
    }
    for (size_t s = 0; s < seqs.size(); ++s) {
      expect_same_logits(tol(), batched[s], alone[s], vocab,
                         architecture_name(setup.arch) + " kv " + kv_name(setup.kv) + " sequence " + std::to_string(s));
    }
  }
}

// Case 3: decoding token by token through a non-contiguous, out-of-order block table gives the
// logits of one prefill.
TEST_P(BackendConformance, PagedDecodeEqualsOnePrefill) {
  for (KvDType kv : {KvDType::kF32, KvDType::kQ8_0}) {
    RandomModel m(Architecture::kQwen3, DType::F32);
    const int64_t vocab = m.config.vocab_size;
    const auto ids = conformance_tokens(40, 300, 9);
    const auto full = prefill_all(m, kv, ids);
    auto b = backend(m, kv, 8, 1);
    const std::vector<int32_t> table = {6, 1, 4};
    std::vector<float> decoded;
    for (int32_t pos = 0; pos < 40; ++pos) {
      const std::vector<float> logits = step_logits(*b, {{{ids[pos]}, pos, table, 1}});
      decoded.insert(decoded.end(), logits.begin(), logits.end());
    }
    expect_same_logits(tol(), decoded, full, vocab, std::string("decode vs prefill, kv ") + kv_name(kv));
  }
}

// Case 4: a second sequence whose block table starts with the first one's two full blocks computes
// only its own tokens and gets the logits of a full recompute; the first sequence's KV is intact.
TEST_P(BackendConformance, PrefixReuseEqualsFullRecompute) {
  RandomModel m(Architecture::kQwen3, DType::F32);
  const int64_t vocab = m.config.vocab_size;
  const KvDType kv = KvDType::kF16;
  const auto a = conformance_tokens(40, 300, 21);
  std::vector<int32_t> bseq(a.begin(), a.begin() + 32);  // two full blocks shared
  const auto tail = conformance_tokens(13, 300, 22);
  bseq.insert(bseq.end(), tail.begin(), tail.end());

  auto b = backend(m, kv, 16);
  const std::vector<int32_t> table_a = {7, 2, 11};
  const std::vector<int32_t> table_b = {7, 2, 5, 0};  // shared ids, then its own
  step_logits(*b, {{a, 0, table_a, 0}});
  const std::vector<float> reused = step_logits(*b, {{tail, 32, table_b, 13, 2}});
  std::vector<float> expected = prefill_all(m, kv, bseq);
  expected.erase(expected.begin(), expected.begin() + 32 * vocab);
  expect_same_logits(tol(), reused, expected, vocab, "prefix reuse");

  // The first sequence continues over the shared blocks as if nothing had happened.
  std::vector<int32_t> a_next = a;
  a_next.push_back(123);
  const std::vector<float> cont = step_logits(*b, {{{123}, 40, table_a, 1}});
  const std::vector<float> full = prefill_all(m, kv, a_next);
  expect_same_logits(tol(), cont, std::vector<float>(full.end() - vocab, full.end()), vocab, "owner after reuse");
}

// Case 5: preemption by recompute. A sequence is computed in chunks, its blocks are given to
// another sequence (overwritten), then it is recomputed in one step into other blocks and decodes
// on: logits equal the first computation and an uninterrupted run.
TEST_P(BackendConformance, RecomputeAfterPreemptionGivesSameLogits) {
  RandomModel m(Architecture::kQwen2, DType::F32);
  const int64_t vocab = m.config.vocab_size;
  const KvDType kv = KvDType::kF32;
  const auto ids = conformance_tokens(30, 300, 31);
  auto b = backend(m, kv, 8);
  const std::vector<float> first_a = step_logits(*b, {{std::vector<int32_t>(ids.begin(), ids.begin() + 20), 0, {1, 3}, 20}});
  const std::vector<float> first_b = step_logits(*b, {{std::vector<int32_t>(ids.begin() + 20, ids.end()), 20, {1, 3}, 10}});
  std::vector<float> first = first_a;
  first.insert(first.end(), first_b.begin(), first_b.end());
  // Preempted: blocks 1 and 3 now hold another sequence.
  step_logits(*b, {{conformance_tokens(32, 300, 32), 0, {3, 1}, 1, 9}});
  const std::vector<float> again = step_logits(*b, {{ids, 0, {6, 0}, 30}});
  expect_same_logits(tol(), again, first, vocab, "recompute");
  const std::vector<float> next = step_logits(*b, {{{77}, 30, {6, 0}, 1}});
  std::vector<int32_t> longer = ids;
  longer.push_back(77);
  const std::vector<float> full = prefill_all(m, kv, longer);
  expect_same_logits(tol(), next, std::vector<float>(full.end() - vocab, full.end()), vocab, "decode after recompute");
}

INSTANTIATE_TEST_SUITE_P(Registered, BackendConformance, ::testing::ValuesIn(registered_backends()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace qs
