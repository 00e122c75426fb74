// The CPU backend's matmul weights, with every matrix whose type the active kernels read packed
// (Q4_K, Q6_K, Q8_0 at the AVX-512 VNNI level, kernels/packed_rows.h) copied once at load into
// 16-row interleaved groups; every other tensor is the original view.
//
// Memory: the packed copies live in anonymous memory (huge pages advised), 2.8% larger than the
// file's bytes for Q4_K and the same size for Q6_K / Q8_0. The original mapping stays (the
// embedding table and the norms are read from it); its pages of packed matrices are not touched
// again after packing, so a mmapped file's page cache can be reclaimed, and a --no-mmap copy
// keeps them (the weights are then held twice; noted in README).
//
// QS_CPU_REPACK=0 in the environment turns packing off (A/B runs of the same binary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "backend/cpu/kernels/dot_kernels.h"
#include "core/thread_pool.h"
#include "model/model_weights.h"

namespace qs {

class PackedModelWeights {
 public:
  /// Packs the matrices of `weights` that `kernels` has packed kernels for (none when `enabled` is
  /// false), splitting the work over `pool`. `weights` must outlive this object. Throws qs::Error
  /// when the memory for the packed copies cannot be allocated (naming the size).
  PackedModelWeights(const ModelWeights& weights, const kernels::DotKernels& kernels, ThreadPool& pool,
                     bool enabled);
  ~PackedModelWeights();
  PackedModelWeights(const PackedModelWeights&) = delete;
  PackedModelWeights& operator=(const PackedModelWeights&) = delete;

  /// The weights to multiply with: packed views where packed, the originals elsewhere.
  const ModelWeights& weights() const { return weights_; }
  int packed_tensors() const { return packed_tensors_; }
  size_t packed_bytes() const { return packed_bytes_; }

  /// False when QS_CPU_REPACK is "0" (read once per process).
  static bool enabled_by_environment();

 private:
  /// Packs one matrix into the next free bytes of arena_ and returns its packed view.
  const TensorView* pack(const TensorView* t, ThreadPool& pool);

  ModelWeights weights_;
  std::deque<TensorView> views_;  // stable addresses for weights_
  uint8_t* arena_ = nullptr;      // one anonymous mapping for every packed matrix
  size_t arena_bytes_ = 0;
  size_t used_bytes_ = 0;
  int packed_tensors_ = 0;
  size_t packed_bytes_ = 0;
};

}  // namespace qs
