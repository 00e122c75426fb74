#include "kernels/cpu/paged_attention.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "kernels/cpu/vec_dot.h"

namespace qs::kernels {
namespace {

// Converts one cached row to f32 (copy for F32 caches).
inline const float* load_row(const KvCache& cache, const void* layer_base, size_t offset,
                             int64_t head_dim, float* tmp) {
  if (cache.dtype() == KvDType::kF32) return static_cast<const float*>(layer_base) + offset;
  const uint16_t* src = static_cast<const uint16_t*>(layer_base) + offset;
  dequantize_row(DType::F16, src, tmp, head_dim);
  return tmp;
}

inline void store_row(KvCache& cache, void* layer_base, size_t offset, const float* src,
                      int64_t head_dim) {
  if (cache.dtype() == KvDType::kF32) {
    std::memcpy(static_cast<float*>(layer_base) + offset, src, head_dim * sizeof(float));
    return;
  }
  uint16_t* dst = static_cast<uint16_t*>(layer_base) + offset;
  for (int64_t i = 0; i < head_dim; ++i) dst[i] = fp32_to_fp16(src[i]);
}

}  // namespace

void kv_cache_store(KvCache& cache, int64_t layer, const int32_t* block_table, int64_t position,
                    const float* k, const float* v) {
  const int32_t block = block_table[position / kKvBlockSize];
  const int32_t row = static_cast<int32_t>(position % kKvBlockSize);
  const int64_t head_dim = cache.head_dim();
  for (int64_t g = 0; g < cache.n_kv_heads(); ++g) {
    const size_t offset = cache.row_offset(block, g, row);
    store_row(cache, cache.k_layer(layer), offset, k + g * head_dim, head_dim);
    store_row(cache, cache.v_layer(layer), offset, v + g * head_dim, head_dim);
  }
}

void paged_attention_token(const float* q, const AttentionShape& shape, KvCache& cache,
                           int64_t layer, const int32_t* block_table, int64_t n_context,
                           float* scores, float* out) {
  const int64_t d = shape.head_dim;
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const void* k_base = cache.k_layer(layer);
  const void* v_base = cache.v_layer(layer);
  float row_tmp[512];  // head_dim <= 512 (checked by the model runner)
  for (int64_t h = 0; h < shape.n_heads; ++h) {
    const int64_t g = h / group;
    const float* qh = q + h * d;
    float* oh = out + h * d;
    float max_score = -INFINITY;
    for (int64_t j = 0; j < n_context; ++j) {
      const size_t offset = cache.row_offset(block_table[j / kKvBlockSize], g,
                                             static_cast<int32_t>(j % kKvBlockSize));
      scores[j] = dot_f32(qh, load_row(cache, k_base, offset, d, row_tmp), d) * scale;
      if (scores[j] > max_score) max_score = scores[j];
    }
    // Second pass: softmax weights relative to the max (no overflow), values summed in order.
    double denom = 0.0;
    std::memset(oh, 0, d * sizeof(float));
    for (int64_t j = 0; j < n_context; ++j) {
      const float w = std::exp(scores[j] - max_score);
      denom += w;
      const size_t offset = cache.row_offset(block_table[j / kKvBlockSize], g,
                                             static_cast<int32_t>(j % kKvBlockSize));
      const float* vrow = load_row(cache, v_base, offset, d, row_tmp);
      for (int64_t i = 0; i < d; ++i) oh[i] += w * vrow[i];
    }
    const float inv = static_cast<float>(1.0 / denom);
    for (int64_t i = 0; i < d; ++i) oh[i] *= inv;
  }
}

}  // namespace qs::kernels
