// Loops of the element-wise kernels, compiled once per ISA level: included only by norm_rope.cc
// (baseline flags) and norm_rope_avx2.cc (-mavx2 -mfma -mf16c), where the compiler vectorizes
// them. Internal linkage (anonymous namespace) keeps the two compilations apart at link time.
#pragma once

#include <cmath>
#include <cstdint>

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

void silu_mul_impl(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace
}  // namespace qs::kernels
