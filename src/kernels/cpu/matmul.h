// y = x W^T for a weight matrix of any supported type, f32 activations.
//
// Shapes: W [out, in] (TensorView, F32/F16/BF16/Q8_0), x [n_tokens, in] f32, y [n_tokens, out] f32.
// y[t, r] = sum_i x[t, i] * W[r, i].
//
// Design: threads split the output rows; each thread takes tiles of kRowsPerTile rows, converts
// them to f32 once into its scratch (skipped for F32 weights) and reuses them for every token, so
// each weight byte is read once per call. Float compute; the quantized integer kernels come with
// the CPU kernels work.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace qs::kernels {

inline constexpr int64_t kRowsPerTile = 16;

/// Per-thread buffers for dequantized weight tiles, sized once for the widest matrix.
class MatmulScratch {
 public:
  MatmulScratch(int n_threads, int64_t max_in_features);
  float* tile(int thread) { return buffer_.data() + static_cast<size_t>(thread) * tile_floats_; }
  int64_t max_in_features() const { return static_cast<int64_t>(tile_floats_) / kRowsPerTile; }
  int n_threads() const { return static_cast<int>(buffer_.size() / std::max<size_t>(1, tile_floats_)); }

 private:
  size_t tile_floats_;
  std::vector<float> buffer_;
};

/// y = x W^T (+ bias when `bias` is not null: [out] f32). Throws qs::Error if W's type is not
/// supported or W.cols() exceeds the scratch width.
void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, MatmulScratch& scratch, const float* bias = nullptr);

}  // namespace qs::kernels
