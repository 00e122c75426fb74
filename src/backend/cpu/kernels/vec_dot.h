// f32 dot products with fixed accumulation order.
//
// Every output is accumulated the same way whichever entry point computes it (8 lanes of FMA in
// index order, then a fixed pairwise lane reduction, then the scalar tail), so a row's result is
// bit-identical whether it is computed alone or in a group of four. This is what makes logits
// batch-invariant.
//
// The AVX2 bodies are compiled only where the including file is built with AVX2 + FMA (the
// *_avx2.cc files); elsewhere the scalar loop. Both live in an ISA-named inline namespace
// (isa_namespace.h) so the two compilations never merge at link time.
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "backend/cpu/kernels/isa_namespace.h"

namespace qs::kernels {
inline namespace QS_ISA_NAMESPACE {

#if defined(__AVX2__) && defined(__FMA__)
inline float hsum8(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);                 // lanes (0+4, 1+5, 2+6, 3+7)
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));        // (0+2, 1+3)
  s = _mm_add_ss(s, _mm_movehdup_ps(s));         // 0+1
  return _mm_cvtss_f32(s);
}
#endif

/// sum_i a[i] * b[i] over n elements.
inline float dot_f32(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float sum = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  sum = hsum8(acc);
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

/// out[r] = dot(x, rows[r]) for four rows of length n; identical per row to dot_f32.
inline void dot4_f32(const float* x, const float* const rows[4], int64_t n, float out[4]) {
  int64_t i = 0;
  float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#if defined(__AVX2__) && defined(__FMA__)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(rows[0] + i), xv, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(rows[1] + i), xv, acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(rows[2] + i), xv, acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(rows[3] + i), xv, acc3);
  }
  sums[0] = hsum8(acc0);
  sums[1] = hsum8(acc1);
  sums[2] = hsum8(acc2);
  sums[3] = hsum8(acc3);
#endif
  for (int r = 0; r < 4; ++r) {
    float s = sums[r];
    for (int64_t j = i; j < n; ++j) s += x[j] * rows[r][j];
    out[r] = s;
  }
}

}  // namespace QS_ISA_NAMESPACE
}  // namespace qs::kernels
