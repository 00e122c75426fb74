// Loops of the element-wise kernels, compiled once per ISA level: included only by norm_rope.cc
// (baseline flags) and norm_rope_avx2.cc (-mavx2 -mfma -mf16c), where the compiler vectorizes
// them (SiLU's AVX2 body is written with intrinsics). Internal linkage (anonymous namespace) keeps
// the two compilations apart at link time.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/vec_exp.h"

namespace qs::kernels {
namespace {

void rms_norm_impl(const float* x, const float* weight, int64_t n, double eps, float* out) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_neox_impl(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cos_sin[i];
      const float s = cos_sin[half + i];
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

// gate[i] = silu(gate[i]) * up[i] = g / (1 + exp(-g)) * up[i]. With AVX2: per 8 lanes
// e = exp(-|g|) (vec_exp.h, e in (0, 1]), sigmoid(g) = 1 / (1 + e) for g >= 0 and e / (1 + e)
// otherwise (the same value, never overflowing), so silu = g * sigmoid * up: vec_exp.h's ~3.4 ulps
// plus four roundings, within the 8-ulp bound the tests hold every level to. Lanes with |g| > 80
// (or NaN), where e could leave vec_exp.h's range, take the scalar formula. Each element's value
// depends only on its own g and up, never on its place in a vector: the tail (n % 8) runs the same
// vector step on a padded copy, so a token's output does not depend on how rows are split over
// threads (CpuBackend is batch-invariant). The scalar expf was 1-2% of a 4B decode step (9728
// calls per layer, session 23 perf).
#if defined(__AVX2__) && defined(__FMA__)
// out[j] = silu(gate[j]) * up[j], j < 8; out may be gate.
inline void silu_mul_8(const float* gate, const float* up, float* out) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
  const __m256 g = _mm256_loadu_ps(gate);
  const __m256 a = _mm256_andnot_ps(sign, g);
  const __m256 e = exp8_nonpositive(_mm256_xor_ps(a, sign));
  const __m256 num = _mm256_blendv_ps(one, e, _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ));
  const __m256 sigmoid = _mm256_div_ps(num, _mm256_add_ps(one, e));
  const __m256 result = _mm256_mul_ps(_mm256_mul_ps(g, sigmoid), _mm256_loadu_ps(up));
  const int outside = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(80.0f), _CMP_NLE_UQ));
  if (outside == 0) {
    _mm256_storeu_ps(out, result);
    return;
  }
  float lanes[8];  // out may be gate: patch from the inputs before storing
  _mm256_storeu_ps(lanes, result);
  for (int j = 0; j < 8; ++j) {
    if ((outside >> j) & 1) lanes[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
  }
  std::memcpy(out, lanes, sizeof lanes);
}
#endif

void silu_mul_impl(float* gate, const float* up, int64_t n) {
#if defined(__AVX2__) && defined(__FMA__)
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) silu_mul_8(gate + i, up + i, gate + i);
  if (i < n) {
    float g[8] = {}, u[8] = {}, out[8];
    const auto rest = static_cast<size_t>(n - i);
    std::memcpy(g, gate + i, rest * sizeof(float));
    std::memcpy(u, up + i, rest * sizeof(float));
    silu_mul_8(g, u, out);
    std::memcpy(gate + i, out, rest * sizeof(float));
  }
#else
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
#endif
}

}  // namespace
}  // namespace qs::kernels
