// Shared pieces of the backend conformance suite (tests/backend/conformance*_test.cc): the
// per-backend tolerance table, building a registered backend over an in-memory RandomModel through
// the factory, running steps with explicit sampling rows, and comparing logits rows.
//
// Adding a backend to the suite = one line in tolerances_for()'s table.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/factory/backend_factory.h"
#include "kv/kv_types.h"
#include "support/backend_test_support.h"
#include "support/random_model.h"

namespace qs {

/// What a backend promises, checked by the conformance suite. Relative errors are per logits row:
/// max_i |l_i - ref_i| / max_i |ref_i|.
struct BackendTolerances {
  // Logits vs the float64 reference with F32 weights and F32 KV.
  double logits_rel = 0;
  // KV stored as f16 / bf16 / q8_0 may add kv_factor * unit_roundoff(dtype) to logits_rel.
  double kv_factor = 0;
  // true: a sequence's logits are bit-identical whatever the batch around it, its chunking, the
  // block ids, prefix sharing or a recompute; false: they agree within paths_rel.
  bool exact_paths = false;
  double paths_rel = 0;
  // |sampled / top logprob - log_softmax(raw row) in double|.
  double logprob_abs = 0;
};

/// The declared tolerances of backend `name`; fails the test for an undeclared backend.
inline BackendTolerances tolerances_for(const std::string& name) {
  static const std::map<std::string, BackendTolerances> kTable = {
      // CPU: f32 accumulation in a fixed order. Measured worst (tiny random models): f32 6e-7,
      // KV f16 9.2e-4 (1.9 u), bf16 7.0e-3 (1.8 u), q8_0 1.7e-2 (2.0 u).
      {"cpu", {.logits_rel = 5e-6, .kv_factor = 4.0, .exact_paths = true, .paths_rel = 0, .logprob_abs = 2e-6}},
      // CUDA: bf16 weights and activations (GEMM inputs), f32 accumulation; not batch-invariant.
      // Declared from the bf16 unit roundoff (2^-8 = 3.9e-3), not yet measured on a GPU.
      {"cuda", {.logits_rel = 3e-2, .kv_factor = 4.0, .exact_paths = false, .paths_rel = 3e-2, .logprob_abs = 3e-2}},
  };
  const auto it = kTable.find(name);
  if (it == kTable.end()) {
    ADD_FAILURE() << "backend '" << name << "' declares no tolerances: add it to tolerances_for()";
    return {};
  }
  return it->second;
}

/// Relative precision of a KV element type: the unit roundoff 2^-24 (f32), 2^-11 (f16), 2^-8
/// (bf16); q8_0 rounds each value to a step of amax/127 of its 32-value block, half a step of
/// error, and a typical value is about half the block's largest magnitude: 1/127 relative, plus
/// its f16 scale's 2^-11.
inline double kv_unit_roundoff(KvDType dtype) {
  switch (dtype) {
    case KvDType::kF32: return 0x1.0p-24;
    case KvDType::kF16: return 0x1.0p-11;
    case KvDType::kBF16: return 0x1.0p-8;
    case KvDType::kQ8_0: return 1.0 / 127 + 0x1.0p-11;
  }
  return 1.0;
}

inline const char* kv_name(KvDType dtype) {
  switch (dtype) {
    case KvDType::kF32: return "f32";
    case KvDType::kF16: return "f16";
    case KvDType::kBF16: return "bf16";
    case KvDType::kQ8_0: return "q8_0";
  }
  return "?";
}

/// A prepared backend `name` (built by make_backend, `threads` unpinned) over `model`, with
/// `n_blocks` KV blocks of `kv`. `model` must outlive the backend.
inline std::unique_ptr<Backend> conformance_backend(const std::string& name, const RandomModel& model, KvDType kv,
                                                    int32_t n_blocks, BackendLimits limits = {128, 256, 16},
                                                    int threads = 2) {
  auto backend = make_backend(BackendOptions{name, threads, false, 0});
  backend->prepare(model.config, model.weights, limits);
  backend->allocate_kv(n_blocks, kv);
  return backend;
}

/// Runs one step over `chunks` with the given sampling rows (one per logits row, chunk order);
/// sampling.vocab_rows is set from the backend when 0. Throws what the backend throws.
inline StepOutput run_step(Backend& backend, const std::vector<TestChunk>& chunks, SamplingBatch sampling) {
  StepBatchBuilder builder;
  for (const TestChunk& c : chunks) builder.add_sequence(c.tokens, c.first_position, c.block_table, c.n_logits);
  StepBatch batch;
  builder.build(batch);
  if (sampling.vocab_rows == 0) sampling.vocab_rows = backend.vocab_rows();
  StepOutput out;
  backend.forward(batch, sampling, out);
  return out;
}

inline std::vector<int32_t> conformance_tokens(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = dist(rng);
  return ids;
}

/// max_i |a_i - ref_i| / max_i |ref_i| over one row of n values.
template <typename T>
double row_relative_error(const float* a, const T* ref, int64_t n) {
  double max_diff = 0, max_ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(ref[i])));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(ref[i])));
  }
  return max_diff / max_ref;
}

/// Expects logits rows `a` and `b` ([n_rows, vocab], same sequence positions computed two ways) to
/// be bit-identical (exact_paths) or within paths_rel per row. Returns the worst relative error.
inline double expect_same_logits(const BackendTolerances& tol, const std::vector<float>& a,
                                 const std::vector<float>& b, int64_t vocab, const std::string& what) {
  EXPECT_EQ(a.size(), b.size()) << what;
  double worst = 0;
  for (size_t r = 0; r * vocab < std::min(a.size(), b.size()); ++r) {
    const double err = row_relative_error(&a[r * vocab], &b[r * vocab], vocab);
    worst = std::max(worst, err);
    if (tol.exact_paths) {
      EXPECT_TRUE(std::equal(a.begin() + r * vocab, a.begin() + (r + 1) * vocab, b.begin() + r * vocab))
          << what << ": row " << r << " not bit-identical (relative error " << err << ")";
    } else {
      EXPECT_LE(err, tol.paths_rel) << what << ": row " << r;
    }
  }
  return worst;
}

}  // namespace qs
