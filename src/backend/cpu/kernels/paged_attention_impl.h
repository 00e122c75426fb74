// The attention loop of paged_attention.h, compiled once per ISA level: included only by
// paged_attention.cc (baseline flags: the scalar loops) and paged_attention_avx2.cc (-mavx2 -mfma
// -mf16c: the AVX2 bodies below and in vec_dot.h). Internal linkage (anonymous namespace) and
// vec_dot.h's ISA-named namespace keep the two compilations apart at link time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/paged_attention.h"
#include "backend/cpu/kernels/vec_dot.h"
#include "formats/dtype.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#endif

namespace qs::kernels {
namespace {

// Query heads of one KV group handled together (their scores for one KV block live on the stack).
constexpr int kHeadsPerPass = 8;

// Converts one cached row to f32 (returns the row itself for F32 caches).
inline const float* load_row(DType type, const uint8_t* layer_base, size_t offset,
                             int64_t head_dim, float* tmp) {
  const uint8_t* src = layer_base + offset;
  switch (type) {
    case DType::F32: return reinterpret_cast<const float*>(src);
    case DType::F16: {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
      for (; i + 8 <= head_dim; i += 8) {
        _mm256_storeu_ps(tmp + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
      }
#endif
      for (; i < head_dim; ++i) tmp[i] = fp16_to_fp32(h[i]);
      return tmp;
    }
    case DType::BF16: {
      const auto* h = reinterpret_cast<const uint16_t*>(src);
      int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
      for (; i + 8 <= head_dim; i += 8) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
        _mm256_storeu_ps(tmp + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
      }
#endif
      for (; i < head_dim; ++i) tmp[i] = bf16_to_fp32(h[i]);
      return tmp;
    }
    default: break;
  }
  dequantize_row(DType::Q8_0, src, tmp, head_dim);
  return tmp;
}

// out[i] = exp(x[i]) for i < n, x[i] <= 0 (scores minus their running max).
inline void exp_nonpositive(const float* x, int n, float* out) {
  int i = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  // Cody-Waite range reduction x = k ln2 + r, |r| <= ln2 / 2, and the degree-5 minimax polynomial
  // of Cephes' expf (S. Moshier, Cephes Math Library); max relative error ~2e-7 on [-87, 0].
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 lowest = _mm256_set1_ps(-87.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_max_ps(_mm256_loadu_ps(x + i), lowest);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(v, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, ln2_hi, v);
    r = _mm256_fnmadd_ps(k, ln2_lo, r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  }
#endif
  for (; i < n; ++i) out[i] = std::exp(x[i]);
}

// acc[i] = acc[i] * scale + w * v[i].
inline void scale_add(float* acc, float scale, float w, const float* v, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  const __m256 s = _mm256_set1_ps(scale), wv = _mm256_set1_ps(w);
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + i), _mm256_mul_ps(_mm256_loadu_ps(acc + i), s)));
  }
#endif
  for (; i < n; ++i) acc[i] = acc[i] * scale + w * v[i];
}

void attention_token_impl(const float* q, const AttentionShape& shape, const KvLayerView& kv,
                           const int32_t* block_table, int64_t n_context, float* out) {
  const int64_t d = shape.head_dim;
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const uint8_t* k_base = kv.k;
  const uint8_t* v_base = kv.v;
  alignas(32) float k_row[512], v_row[512];  // head_dim <= 512 (checked by the model runner)
  alignas(32) float s[kHeadsPerPass][kKvBlockSize];
  float running_max[kHeadsPerPass], running_sum[kHeadsPerPass];
  for (int64_t g = 0; g < shape.n_kv_heads; ++g) {
    for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += kHeadsPerPass) {
      const int nh = static_cast<int>(std::min<int64_t>(kHeadsPerPass, (g + 1) * group - h0));
      for (int h = 0; h < nh; ++h) {
        running_max[h] = -INFINITY;
        running_sum[h] = 0.0f;
        std::memset(out + (h0 + h) * d, 0, d * sizeof(float));
      }
      // One pass over the KV blocks; each K and V row is converted once for the nh query heads.
      for (int64_t j0 = 0; j0 < n_context; j0 += kKvBlockSize) {
        const int rows = static_cast<int>(std::min<int64_t>(kKvBlockSize, n_context - j0));
        const int32_t block = block_table[j0 / kKvBlockSize];
        for (int j = 0; j < rows; ++j) {
          const float* k = load_row(kv.element_type, k_base, kv.row_offset(block, g, j), d, k_row);
          for (int h = 0; h < nh; ++h) s[h][j] = dot_f32(q + (h0 + h) * d, k, d) * scale;
        }
        // Online softmax (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022): rescale
        // the partial sums by exp(old_max - new_max) when the block raises the max.
        float correction[kHeadsPerPass];
        for (int h = 0; h < nh; ++h) {
          float block_max = running_max[h];
          for (int j = 0; j < rows; ++j) block_max = std::max(block_max, s[h][j]);
          correction[h] = running_max[h] == -INFINITY ? 0.0f : std::exp(running_max[h] - block_max);
          running_max[h] = block_max;
          for (int j = 0; j < rows; ++j) s[h][j] -= block_max;
          exp_nonpositive(s[h], rows, s[h]);
          float block_sum = 0.0f;
          for (int j = 0; j < rows; ++j) block_sum += s[h][j];
          running_sum[h] = running_sum[h] * correction[h] + block_sum;
        }
        for (int j = 0; j < rows; ++j) {
          const float* v = load_row(kv.element_type, v_base, kv.row_offset(block, g, j), d, v_row);
          for (int h = 0; h < nh; ++h) {
            scale_add(out + (h0 + h) * d, j == 0 ? correction[h] : 1.0f, s[h][j], v, d);
          }
        }
      }
      for (int h = 0; h < nh; ++h) {
        const float inv = 1.0f / running_sum[h];
        float* oh = out + (h0 + h) * d;
        for (int64_t i = 0; i < d; ++i) oh[i] *= inv;
      }
    }
  }
}

}  // namespace
}  // namespace qs::kernels
