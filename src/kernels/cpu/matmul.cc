#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kernels/cpu/vec_dot.h"

namespace qs::kernels {

MatmulScratch::MatmulScratch(int n_threads, int64_t max_in_features)
    : tile_floats_(static_cast<size_t>(kRowsPerTile * max_in_features)),
      buffer_(tile_floats_ * static_cast<size_t>(std::max(1, n_threads))) {}

namespace {

// Computes rows [row_begin, row_end) of y for all tokens from f32 rows `rows` (row stride `in`).
void tile_times_tokens(const float* rows, int64_t row_begin, int64_t row_end, int64_t in,
                       const float* x, int64_t n_tokens, int64_t out, float* y, const float* bias) {
  const int64_t n_rows = row_end - row_begin;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * in;
    float* yt = y + t * out + row_begin;
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) {
      const float* group[4] = {rows + r * in, rows + (r + 1) * in, rows + (r + 2) * in,
                               rows + (r + 3) * in};
      dot4_f32(xt, group, in, yt + r);
    }
    for (; r < n_rows; ++r) yt[r] = dot_f32(xt, rows + r * in, in);
    if (bias != nullptr) {
      for (int64_t i = 0; i < n_rows; ++i) yt[i] += bias[row_begin + i];
    }
  }
}

}  // namespace

void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, MatmulScratch& scratch, const float* bias) {
  const int64_t out = weight.rows();
  const int64_t in = weight.cols();
  const size_t row_stride_bytes = row_bytes(weight.dtype, in);
  // F32 rows are used in place when 4-byte aligned; otherwise they go through the scratch tile.
  const bool is_f32 = weight.dtype == DType::F32 && reinterpret_cast<uintptr_t>(weight.data) % 4 == 0 &&
                      row_stride_bytes % 4 == 0;
  if (in > scratch.max_in_features() || pool.n_threads() > scratch.n_threads()) {
    throw Error("matmul: weight '" + weight.name + "' is wider than the scratch buffers");
  }
  if (weight.dtype != DType::F32 && weight.dtype != DType::F16 && weight.dtype != DType::BF16 &&
      weight.dtype != DType::Q8_0) {
    throw Error("matmul: weight '" + weight.name + "' has unsupported type " +
                std::string(dtype_name(weight.dtype)));
  }
  const int64_t n_tiles = (out + kRowsPerTile - 1) / kRowsPerTile;
  pool.parallel_for(n_tiles, [&](int64_t tile_begin, int64_t tile_end, int thread) {
    float* tile = scratch.tile(thread);
    for (int64_t tile_index = tile_begin; tile_index < tile_end; ++tile_index) {
      const int64_t row_begin = tile_index * kRowsPerTile;
      const int64_t row_end = std::min(out, row_begin + kRowsPerTile);
      const uint8_t* src = weight.data + static_cast<size_t>(row_begin) * row_stride_bytes;
      const float* rows = reinterpret_cast<const float*>(src);
      if (!is_f32) {
        for (int64_t r = 0; r < row_end - row_begin; ++r) {
          dequantize_row(weight.dtype, src + r * row_stride_bytes, tile + r * in, in);
        }
        rows = tile;
      }
      tile_times_tokens(rows, row_begin, row_end, in, x, n_tokens, out, y, bias);
    }
  });
}

}  // namespace qs::kernels
