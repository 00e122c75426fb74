// Element-wise ops of the Qwen decoder block: RMSNorm, rotary position embedding, SwiGLU.
//
// rms_norm, rope_neox and silu_mul run the path of active_cpu_isa() (ElementwiseKernels: scalar in
// norm_rope.cc, AVX2 in norm_rope_avx2.cc; both compile the same loops of norm_rope_impl.h, so
// the paths differ only where the compiler contracts a * b + c into an FMA on AVX2).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/cpu_isa.h"

namespace qs::kernels {

/// RMSNorm (Zhang & Sennrich 2019), as Qwen's `Qwen3RMSNorm`:
/// out[i] = x[i] / sqrt(mean_j(x[j]^2) + eps) * weight[i], over one row of n elements.
/// The mean is accumulated in double. `out` may alias `x`.
void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out);

/// Rotary embedding, "rotate half" (GPT-NeoX) form used by Qwen (Su et al. 2021, RoFormer):
/// for i < d/2, with angle = position * theta^(-2i/d):
///   out[i]       = x[i] * cos(angle) - x[i + d/2] * sin(angle)
///   out[i + d/2] = x[i + d/2] * cos(angle) + x[i] * sin(angle)
/// Applied in place to `n_heads` consecutive heads of `head_dim` floats: x [n_heads, head_dim].
/// `cos_sin` holds [head_dim/2] cos then [head_dim/2] sin for this position (rope_cos_sin).
void rope_neox(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin);

/// Fills cos_sin [head_dim] (cos for i < d/2, then sin) for `position`, angles computed in double.
void rope_cos_sin(int64_t position, int64_t head_dim, double theta, float* cos_sin);

/// SwiGLU (Shazeer 2020): gate[i] = silu(gate[i]) * up[i], silu(z) = z / (1 + exp(-z)).
void silu_mul(float* gate, const float* up, int64_t n);

/// One ISA level's element-wise kernels (same contracts as the functions above).
struct ElementwiseKernels {
  CpuIsa isa;
  void (*rms_norm)(const float* x, const float* weight, int64_t n, double eps, float* out);
  void (*rope_neox)(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin);
  void (*silu_mul)(float* gate, const float* up, int64_t n);
};

/// The kernels of one level, or nullptr when the CPU or the build lacks that level's path.
const ElementwiseKernels* elementwise_kernels_for(CpuIsa isa);
/// The kernels the functions above run (highest filled level <= active_cpu_isa()).
const ElementwiseKernels& active_elementwise_kernels();

// Per-level tables: norm_rope.cc / norm_rope_avx2.cc. avx2_elementwise_kernels() returns nullptr
// when the build has no AVX2 path; it does not check the CPU, and must only be called after
// cpu_has_isa(CpuIsa::kAvx2).
const ElementwiseKernels& scalar_elementwise_kernels();
const ElementwiseKernels* avx2_elementwise_kernels();

}  // namespace qs::kernels
