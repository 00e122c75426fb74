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
#include "backend/cpu/kernels/vec_exp.h"
#include "formats/dtype.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#endif
// The AVX-512 path (paged_attention_avx512.cc: AVX-512 F/BW/VL besides AVX2) widens the loops
// below to 16 floats and keeps the AVX2 loops for the remainders.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define QS_ATTENTION_AVX512 1
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
#if defined(QS_ATTENTION_AVX512)
      for (; i + 16 <= head_dim; i += 16) {
        _mm512_storeu_ps(tmp + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
      }
#endif
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

// out[i] = exp(x[i]) for i < n, x[i] <= 0 (scores minus their running max), vec_exp.h's polynomial
// in vectors of 8.
inline void exp_nonpositive(const float* x, int n, float* out) {
  int i = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp8_nonpositive(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) out[i] = std::exp(x[i]);
}

// For each element i in [begin, n): acc[i] = acc[i] * corr + w[0] * v[0][i], then acc[i] = acc[i] + w[j] * v[j][i]
// for j = 1 .. rows-1 (one online-softmax KV block applied to one output row; rows >= 1). On AVX2
// each product-add is one FMA and the row stays in registers across the block's rows.
inline void scale_add_rows(float* acc, float corr, const float* w, const float* const* v, int rows,
                           int64_t n, int64_t begin = 0) {
  int64_t i = begin;
#if defined(QS_ATTENTION_AVX512)
  const __m512 cz = _mm512_set1_ps(corr);
  for (; i + 64 <= n; i += 64) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc + i), cz);
    __m512 a1 = _mm512_mul_ps(_mm512_loadu_ps(acc + i + 16), cz);
    __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(acc + i + 32), cz);
    __m512 a3 = _mm512_mul_ps(_mm512_loadu_ps(acc + i + 48), cz);
    for (int j = 0; j < rows; ++j) {
      const __m512 wj = _mm512_set1_ps(w[j]);
      const float* vj = v[j] + i;
      a0 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj), a0);
      a1 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj + 16), a1);
      a2 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj + 32), a2);
      a3 = _mm512_fmadd_ps(wj, _mm512_loadu_ps(vj + 48), a3);
    }
    _mm512_storeu_ps(acc + i, a0);
    _mm512_storeu_ps(acc + i + 16, a1);
    _mm512_storeu_ps(acc + i + 32, a2);
    _mm512_storeu_ps(acc + i + 48, a3);
  }
  for (; i + 16 <= n; i += 16) {
    __m512 a = _mm512_mul_ps(_mm512_loadu_ps(acc + i), cz);
    for (int j = 0; j < rows; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_loadu_ps(v[j] + i), a);
    _mm512_storeu_ps(acc + i, a);
  }
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  const __m256 c = _mm256_set1_ps(corr);
  for (; i + 32 <= n; i += 32) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + i), c);
    __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 8), c);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 16), c);
    __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 24), c);
    for (int j = 0; j < rows; ++j) {
      const __m256 wj = _mm256_set1_ps(w[j]);
      const float* vj = v[j] + i;
      a0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj), a0);
      a1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 8), a1);
      a2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 16), a2);
      a3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(vj + 24), a3);
    }
    _mm256_storeu_ps(acc + i, a0);
    _mm256_storeu_ps(acc + i + 8, a1);
    _mm256_storeu_ps(acc + i + 16, a2);
    _mm256_storeu_ps(acc + i + 24, a3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), c);
    for (int j = 0; j < rows; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(v[j] + i), a);
    _mm256_storeu_ps(acc + i, a);
  }
#endif
  for (; i < n; ++i) {
    float a = acc[i] * corr;
    for (int j = 0; j < rows; ++j) a += w[j] * v[j][i];
    acc[i] = a;
  }
}

// max(s[0], .., s[rows - 1]) of one block's score slots (rows 1..16).
inline float max_of_scores(const float* s, int rows) {
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  if (rows == kKvBlockSize) {
    __m256 m = _mm256_max_ps(_mm256_loadu_ps(s), _mm256_loadu_ps(s + 8));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
  }
#endif
  float m = s[0];
  for (int j = 1; j < rows; ++j) m = std::max(m, s[j]);
  return m;
}

// s[j] = exp(s[j] - max) for j < rows, s[j] = 0 for rows <= j < 16; returns the sum of the 16 slots.
inline float exp_scores(float* s, int rows, float max) {
  for (int j = rows; j < kKvBlockSize; ++j) s[j] = max;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  const __m256 m = _mm256_set1_ps(max);
  _mm256_storeu_ps(s, _mm256_sub_ps(_mm256_loadu_ps(s), m));
  _mm256_storeu_ps(s + 8, _mm256_sub_ps(_mm256_loadu_ps(s + 8), m));
#else
  for (int j = 0; j < kKvBlockSize; ++j) s[j] -= max;
#endif
  exp_nonpositive(s, kKvBlockSize, s);
  for (int j = rows; j < kKvBlockSize; ++j) s[j] = 0.0f;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  const __m256 v = _mm256_add_ps(_mm256_loadu_ps(s), _mm256_loadu_ps(s + 8));
  return hsum8(v);
#else
  float sum = 0.0f;
  for (int j = 0; j < kKvBlockSize; ++j) sum += s[j];
  return sum;
#endif
}

// out[2 h + j] = sum_i q[h][i] * k[j][i] for 4 query rows and 2 key rows of length n (the scores of
// 4 heads against 2 keys). On AVX2 each (h, j) has one 8-lane accumulator over i (lane l sums
// i = l mod 8), reduced as ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)), then the i >= 8 floor(n/8) tail
// is added in order; a score's value does not depend on which rows share the call.
inline void scores_4x2(const float* const q[4], const float* k0, const float* k1, int64_t n, float out[8]) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  __m256 a00 = _mm256_setzero_ps(), a01 = _mm256_setzero_ps(), a10 = _mm256_setzero_ps();
  __m256 a11 = _mm256_setzero_ps(), a20 = _mm256_setzero_ps(), a21 = _mm256_setzero_ps();
  __m256 a30 = _mm256_setzero_ps(), a31 = _mm256_setzero_ps();
#if defined(QS_ATTENTION_AVX512)
  if (n >= 16) {  // 16 lanes, folded into the 8-lane accumulators (lane l + lane l + 8)
    __m512 z00 = _mm512_setzero_ps(), z01 = _mm512_setzero_ps(), z10 = _mm512_setzero_ps();
    __m512 z11 = _mm512_setzero_ps(), z20 = _mm512_setzero_ps(), z21 = _mm512_setzero_ps();
    __m512 z30 = _mm512_setzero_ps(), z31 = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
      const __m512 kv0 = _mm512_loadu_ps(k0 + i), kv1 = _mm512_loadu_ps(k1 + i);
      __m512 qv = _mm512_loadu_ps(q[0] + i);
      z00 = _mm512_fmadd_ps(qv, kv0, z00);
      z01 = _mm512_fmadd_ps(qv, kv1, z01);
      qv = _mm512_loadu_ps(q[1] + i);
      z10 = _mm512_fmadd_ps(qv, kv0, z10);
      z11 = _mm512_fmadd_ps(qv, kv1, z11);
      qv = _mm512_loadu_ps(q[2] + i);
      z20 = _mm512_fmadd_ps(qv, kv0, z20);
      z21 = _mm512_fmadd_ps(qv, kv1, z21);
      qv = _mm512_loadu_ps(q[3] + i);
      z30 = _mm512_fmadd_ps(qv, kv0, z30);
      z31 = _mm512_fmadd_ps(qv, kv1, z31);
    }
    const auto fold = [](__m512 z) {
      return _mm256_add_ps(_mm512_castps512_ps256(z), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z), 1)));
    };
    a00 = fold(z00), a01 = fold(z01), a10 = fold(z10), a11 = fold(z11);
    a20 = fold(z20), a21 = fold(z21), a30 = fold(z30), a31 = fold(z31);
  }
#endif
  for (; i + 8 <= n; i += 8) {
    const __m256 kv0 = _mm256_loadu_ps(k0 + i), kv1 = _mm256_loadu_ps(k1 + i);
    __m256 qv = _mm256_loadu_ps(q[0] + i);
    a00 = _mm256_fmadd_ps(qv, kv0, a00);
    a01 = _mm256_fmadd_ps(qv, kv1, a01);
    qv = _mm256_loadu_ps(q[1] + i);
    a10 = _mm256_fmadd_ps(qv, kv0, a10);
    a11 = _mm256_fmadd_ps(qv, kv1, a11);
    qv = _mm256_loadu_ps(q[2] + i);
    a20 = _mm256_fmadd_ps(qv, kv0, a20);
    a21 = _mm256_fmadd_ps(qv, kv1, a21);
    qv = _mm256_loadu_ps(q[3] + i);
    a30 = _mm256_fmadd_ps(qv, kv0, a30);
    a31 = _mm256_fmadd_ps(qv, kv1, a31);
  }
  // Lanes of u0: [a00, a01, a10, a11] partial sums of lanes 0-3 | the same of lanes 4-7; u1 for
  // heads 2-3. Adding the halves gives the 8 sums in the order of out.
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a00, a01), _mm256_hadd_ps(a10, a11));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a20, a21), _mm256_hadd_ps(a30, a31));
  const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
  _mm256_storeu_ps(out, sums);
#else
  for (int r = 0; r < 8; ++r) out[r] = 0.0f;
#endif
  for (int h = 0; h < 4; ++h) {
    for (int64_t t = i; t < n; ++t) {
      out[2 * h] += q[h][t] * k0[t];
      out[2 * h + 1] += q[h][t] * k1[t];
    }
  }
}

#if defined(QS_ATTENTION_AVX512)
// The scores of 4 query rows against the 16 key rows of a KV block, one zmm per query row (lane j:
// key j), unscaled: out[h][j] = sum_i q[h][i] * k[j][i] for j < rows; lanes j >= rows are
// unspecified (k[j] for j >= rows is never read). n % 16 == 0.
//
// Per group of 4 keys, 16 accumulators (4 rows x 4 keys) hold 16-lane partial sums over i (lane l:
// i = l mod 16, in order); a fixed shuffle-and-add tree reduces them to one zmm whose 128-bit lane
// h holds row h's 4 scores, and a 4 x 4 transpose of 128-bit lanes puts each row's 16 keys in one
// zmm. Every score's arithmetic depends only on its own row and key, so a query row gets the same
// bits in whatever tile it is computed (paged_attention_tile == paged_attention_token).
inline void scores_4x16(const float* const q[4], const float* const* k, int rows, int64_t n, __m512 out[4]) {
  __m512 e[4];
  for (int g = 0; g < 4; ++g) {
    if (4 * g >= rows) {
      e[g] = _mm512_setzero_ps();
      continue;
    }
    const float* kr[4];
    for (int c = 0; c < 4; ++c) kr[c] = k[std::min(4 * g + c, rows - 1)];
    __m512 z[4][4];
    for (int h = 0; h < 4; ++h) {
      for (int c = 0; c < 4; ++c) z[h][c] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n; i += 16) {
      const __m512 k0 = _mm512_loadu_ps(kr[0] + i), k1 = _mm512_loadu_ps(kr[1] + i);
      const __m512 k2 = _mm512_loadu_ps(kr[2] + i), k3 = _mm512_loadu_ps(kr[3] + i);
      for (int h = 0; h < 4; ++h) {
        const __m512 qv = _mm512_loadu_ps(q[h] + i);
        z[h][0] = _mm512_fmadd_ps(qv, k0, z[h][0]);
        z[h][1] = _mm512_fmadd_ps(qv, k1, z[h][1]);
        z[h][2] = _mm512_fmadd_ps(qv, k2, z[h][2]);
        z[h][3] = _mm512_fmadd_ps(qv, k3, z[h][3]);
      }
    }
    // Per row h: w[h] 128-bit lane L = [key 0..3 sums over that lane's 4 elements].
    __m512 w[4];
    for (int h = 0; h < 4; ++h) {
      const __m512 u01 = _mm512_add_ps(_mm512_unpacklo_ps(z[h][0], z[h][1]), _mm512_unpackhi_ps(z[h][0], z[h][1]));
      const __m512 u23 = _mm512_add_ps(_mm512_unpacklo_ps(z[h][2], z[h][3]), _mm512_unpackhi_ps(z[h][2], z[h][3]));
      w[h] = _mm512_add_ps(_mm512_shuffle_ps(u01, u23, 0x44), _mm512_shuffle_ps(u01, u23, 0xEE));
    }
    // Sum the four 128-bit lanes of each w[h]; lane h of e[g] = row h's keys 4g .. 4g + 3.
    const __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], 0x88), _mm512_shuffle_f32x4(w[0], w[1], 0xDD));
    const __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(w[2], w[3], 0x88), _mm512_shuffle_f32x4(w[2], w[3], 0xDD));
    e[g] = _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, 0x88), _mm512_shuffle_f32x4(x01, x23, 0xDD));
  }
  // 4 x 4 transpose of 128-bit lanes: out[h] = [e0.h, e1.h, e2.h, e3.h].
  const __m512 a = _mm512_shuffle_f32x4(e[0], e[1], 0x44), b = _mm512_shuffle_f32x4(e[2], e[3], 0x44);
  const __m512 c = _mm512_shuffle_f32x4(e[0], e[1], 0xEE), d = _mm512_shuffle_f32x4(e[2], e[3], 0xEE);
  out[0] = _mm512_shuffle_f32x4(a, b, 0x88);
  out[1] = _mm512_shuffle_f32x4(a, b, 0xDD);
  out[2] = _mm512_shuffle_f32x4(c, d, 0x88);
  out[3] = _mm512_shuffle_f32x4(c, d, 0xDD);
}
#endif

// scale_add_rows for 4 output rows at once (acc[h], corr[h], w[h]: 4 heads of one token), sharing
// each load of a V row; per element the same operations in the same order as scale_add_rows.
inline void scale_add_rows_x4(float* const acc[4], const float corr[4], const float* const w[4],
                              const float* const* v, int rows, int64_t n) {
  int64_t i = 0;
#if defined(QS_ATTENTION_AVX512)
  // 64 elements x 4 rows in 16 accumulators: per V row 4 loads and 4 broadcasts feed 16 FMAs.
  for (; i + 64 <= n; i += 64) {
    __m512 a[4][4];
    for (int h = 0; h < 4; ++h) {
      const __m512 c = _mm512_set1_ps(corr[h]);
      for (int u = 0; u < 4; ++u) a[h][u] = _mm512_mul_ps(_mm512_loadu_ps(acc[h] + i + 16 * u), c);
    }
    for (int j = 0; j < rows; ++j) {
      const float* vj = v[j] + i;
      const __m512 v0 = _mm512_loadu_ps(vj), v1 = _mm512_loadu_ps(vj + 16);
      const __m512 v2 = _mm512_loadu_ps(vj + 32), v3 = _mm512_loadu_ps(vj + 48);
      for (int h = 0; h < 4; ++h) {
        const __m512 wj = _mm512_set1_ps(w[h][j]);
        a[h][0] = _mm512_fmadd_ps(wj, v0, a[h][0]);
        a[h][1] = _mm512_fmadd_ps(wj, v1, a[h][1]);
        a[h][2] = _mm512_fmadd_ps(wj, v2, a[h][2]);
        a[h][3] = _mm512_fmadd_ps(wj, v3, a[h][3]);
      }
    }
    for (int h = 0; h < 4; ++h) {
      for (int u = 0; u < 4; ++u) _mm512_storeu_ps(acc[h] + i + 16 * u, a[h][u]);
    }
  }
  for (; i + 32 <= n; i += 32) {
    __m512 a[4][2];
    for (int h = 0; h < 4; ++h) {
      const __m512 c = _mm512_set1_ps(corr[h]);
      a[h][0] = _mm512_mul_ps(_mm512_loadu_ps(acc[h] + i), c);
      a[h][1] = _mm512_mul_ps(_mm512_loadu_ps(acc[h] + i + 16), c);
    }
    for (int j = 0; j < rows; ++j) {
      const __m512 v0 = _mm512_loadu_ps(v[j] + i), v1 = _mm512_loadu_ps(v[j] + i + 16);
      for (int h = 0; h < 4; ++h) {
        const __m512 wj = _mm512_set1_ps(w[h][j]);
        a[h][0] = _mm512_fmadd_ps(wj, v0, a[h][0]);
        a[h][1] = _mm512_fmadd_ps(wj, v1, a[h][1]);
      }
    }
    for (int h = 0; h < 4; ++h) {
      _mm512_storeu_ps(acc[h] + i, a[h][0]);
      _mm512_storeu_ps(acc[h] + i + 16, a[h][1]);
    }
  }
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  for (; i + 16 <= n; i += 16) {
    __m256 a[4][2];
    for (int h = 0; h < 4; ++h) {
      const __m256 c = _mm256_set1_ps(corr[h]);
      a[h][0] = _mm256_mul_ps(_mm256_loadu_ps(acc[h] + i), c);
      a[h][1] = _mm256_mul_ps(_mm256_loadu_ps(acc[h] + i + 8), c);
    }
    for (int j = 0; j < rows; ++j) {
      const __m256 v0 = _mm256_loadu_ps(v[j] + i), v1 = _mm256_loadu_ps(v[j] + i + 8);
      for (int h = 0; h < 4; ++h) {
        const __m256 wj = _mm256_set1_ps(w[h][j]);
        a[h][0] = _mm256_fmadd_ps(wj, v0, a[h][0]);
        a[h][1] = _mm256_fmadd_ps(wj, v1, a[h][1]);
      }
    }
    for (int h = 0; h < 4; ++h) {
      _mm256_storeu_ps(acc[h] + i, a[h][0]);
      _mm256_storeu_ps(acc[h] + i + 8, a[h][1]);
    }
  }
#endif
  for (int h = 0; h < 4; ++h) scale_add_rows(acc[h], corr[h], w[h], v, rows, n, i);
}

// paged_attention_tile's contract (paged_attention.h). Per query token and KV group: one pass over
// the KV blocks with an online softmax. Each K and V row of a block is converted to f32 once for
// every query token of the tile and every query head of the group; a token's operations do not
// depend on the other tokens of its tile (so a tile equals its tokens one at a time, bit for bit).
void attention_tile_impl(const float* q, int64_t q_stride, int n_q, const int64_t* n_context,
                         const AttentionShape& shape, const KvLayerView& kv, const int32_t* block_table,
                         float* out, int64_t out_stride) {
  const int64_t d = shape.head_dim;
  const int64_t group = shape.n_heads / shape.n_kv_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  int64_t max_context = 0;
  for (int t = 0; t < n_q; ++t) max_context = std::max(max_context, n_context[t]);
  // One KV block's rows in f32 (head_dim <= 512, checked by the model runner): 2 x 32 KiB.
  alignas(32) float k_rows[kKvBlockSize][512], v_rows[kKvBlockSize][512];
  const float* k_ptr[kKvBlockSize];
  const float* v_ptr[kKvBlockSize];
  alignas(32) float s[kMaxQueryTile][kHeadsPerPass][kKvBlockSize];
  float running_max[kMaxQueryTile][kHeadsPerPass], running_sum[kMaxQueryTile][kHeadsPerPass];
  float correction[kMaxQueryTile][kHeadsPerPass];
  const float* q_rows[4];
  alignas(32) float dots[8];
  for (int64_t g = 0; g < shape.n_kv_heads; ++g) {
    for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += kHeadsPerPass) {
      const int nh = static_cast<int>(std::min<int64_t>(kHeadsPerPass, (g + 1) * group - h0));
      for (int t = 0; t < n_q; ++t) {
        for (int h = 0; h < nh; ++h) {
          running_max[t][h] = -INFINITY;
          running_sum[t][h] = 0.0f;
          std::memset(out + t * out_stride + (h0 + h) * d, 0, d * sizeof(float));
        }
      }
      for (int64_t j0 = 0; j0 < max_context; j0 += kKvBlockSize) {
        const int rows = static_cast<int>(std::min<int64_t>(kKvBlockSize, max_context - j0));
        const int32_t block = block_table[j0 / kKvBlockSize];
        if (j0 + kKvBlockSize < max_context) {
          // The next block's rows of this KV head (16 x row_bytes contiguous bytes in K and in V)
          // are requested now: blocks sit anywhere in the pool, which defeats the hardware
          // prefetcher at every block boundary.
          const size_t next = kv.row_offset(block_table[j0 / kKvBlockSize + 1], g, 0);
          for (size_t byte = 0; byte < kKvBlockSize * kv.row_bytes; byte += 64) {
            __builtin_prefetch(kv.k + next + byte);
            __builtin_prefetch(kv.v + next + byte);
          }
        }
        for (int j = 0; j < rows; ++j) {
          k_ptr[j] = load_row(kv.element_type, kv.k, kv.row_offset(block, g, j), d, k_rows[j]);
        }
        for (int t = 0; t < n_q; ++t) {
          const int rows_t = static_cast<int>(std::min<int64_t>(kKvBlockSize, n_context[t] - j0));
          if (rows_t <= 0) continue;
          const float* qt = q + t * q_stride;
#if defined(QS_ATTENTION_AVX512)
          if (d % 16 == 0) {
            // Scores of 4 heads x 16 keys in registers (a missing head repeats the last one and is
            // dropped), then per head the online-softmax step on one zmm: slots past rows_t weigh 0.
            alignas(64) float max_step[kHeadsPerPass] = {}, rescale[kHeadsPerPass], block_sum[kHeadsPerPass];
            const __mmask16 valid = static_cast<__mmask16>((1u << rows_t) - 1);
            const __m512 scale_v = _mm512_set1_ps(scale);
            for (int h = 0; h < nh; h += 4) {
              for (int r = 0; r < 4; ++r) q_rows[r] = qt + (h0 + std::min(h + r, nh - 1)) * d;
              __m512 sv[4];
              scores_4x16(q_rows, k_ptr, rows_t, d, sv);
              const int heads = std::min(4, nh - h);
              for (int r = 0; r < heads; ++r) {
                const __m512 x = _mm512_mul_ps(sv[r], scale_v);
                const float block_max = std::max(running_max[t][h + r], _mm512_mask_reduce_max_ps(valid, x));
                max_step[h + r] = running_max[t][h + r] == -INFINITY ? 0.0f : running_max[t][h + r] - block_max;
                running_max[t][h + r] = block_max;
                const __m512 p = _mm512_maskz_mov_ps(valid, exp16_nonpositive(_mm512_sub_ps(x, _mm512_set1_ps(block_max))));
                _mm512_storeu_ps(s[t][h + r], p);
                block_sum[h + r] = _mm512_reduce_add_ps(p);
              }
            }
            exp_nonpositive(max_step, kHeadsPerPass, rescale);
            for (int h = 0; h < nh; ++h) {
              correction[t][h] = rescale[h];  // 1 at the first block, where the sum and output are 0
              running_sum[t][h] = running_sum[t][h] * correction[t][h] + block_sum[h];
            }
            continue;
          }
#endif
          // Scores in 4-head x 2-key tiles; a missing head or key repeats the last one and its
          // scores are dropped.
          for (int h = 0; h < nh; h += 4) {
            for (int r = 0; r < 4; ++r) q_rows[r] = qt + (h0 + std::min(h + r, nh - 1)) * d;
            const int heads = std::min(4, nh - h);
            for (int j = 0; j < rows_t; j += 2) {
              const int j1 = std::min(j + 1, rows_t - 1);
              scores_4x2(q_rows, k_ptr[j], k_ptr[j1], d, dots);
              for (int r = 0; r < heads; ++r) {
                s[t][h + r][j] = dots[2 * r] * scale;
                s[t][h + r][j1] = dots[2 * r + 1] * scale;
              }
            }
          }
          // Online softmax (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022) over the
          // block's 16 score slots (slots past rows_t weigh 0): the heads' rescale factors
          // exp(old_max - new_max) are computed together, one vector exp for up to 8 heads.
          alignas(32) float max_step[kHeadsPerPass] = {}, rescale[kHeadsPerPass], block_sum[kHeadsPerPass];
          for (int h = 0; h < nh; ++h) {
            float* sh = s[t][h];
            const float block_max = std::max(running_max[t][h], max_of_scores(sh, rows_t));
            max_step[h] = running_max[t][h] == -INFINITY ? 0.0f : running_max[t][h] - block_max;
            running_max[t][h] = block_max;
            block_sum[h] = exp_scores(sh, rows_t, block_max);
          }
          exp_nonpositive(max_step, kHeadsPerPass, rescale);
          for (int h = 0; h < nh; ++h) {
            correction[t][h] = rescale[h];  // 1 at the first block, where the sum and output are 0
            running_sum[t][h] = running_sum[t][h] * correction[t][h] + block_sum[h];
          }
        }
        for (int j = 0; j < rows; ++j) {
          v_ptr[j] = load_row(kv.element_type, kv.v, kv.row_offset(block, g, j), d, v_rows[j]);
        }
        for (int t = 0; t < n_q; ++t) {
          const int rows_t = static_cast<int>(std::min<int64_t>(kKvBlockSize, n_context[t] - j0));
          if (rows_t <= 0) continue;
          float* ot = out + t * out_stride;
          int h = 0;
          for (; h + 4 <= nh; h += 4) {
            float* const acc[4] = {ot + (h0 + h) * d, ot + (h0 + h + 1) * d, ot + (h0 + h + 2) * d,
                                   ot + (h0 + h + 3) * d};
            const float* const w[4] = {s[t][h], s[t][h + 1], s[t][h + 2], s[t][h + 3]};
            scale_add_rows_x4(acc, &correction[t][h], w, v_ptr, rows_t, d);
          }
          for (; h < nh; ++h) scale_add_rows(ot + (h0 + h) * d, correction[t][h], s[t][h], v_ptr, rows_t, d);
        }
      }
      for (int t = 0; t < n_q; ++t) {
        for (int h = 0; h < nh; ++h) {
          const float inv = 1.0f / running_sum[t][h];
          float* oh = out + t * out_stride + (h0 + h) * d;
          for (int64_t i = 0; i < d; ++i) oh[i] *= inv;
        }
      }
    }
  }
}

// paged_attention_token's contract: a tile of one token.
void attention_token_impl(const float* q, const AttentionShape& shape, const KvLayerView& kv,
                          const int32_t* block_table, int64_t n_context, float* out) {
  attention_tile_impl(q, 0, 1, &n_context, shape, kv, block_table, out, 0);
}

}  // namespace
}  // namespace qs::kernels
