#include "backend/cpu/kernels/norm_rope.h"

#include <cmath>

#include "backend/cpu/kernels/norm_rope_impl.h"

namespace qs::kernels {

const ElementwiseKernels& scalar_elementwise_kernels() {
  static const ElementwiseKernels table = {CpuIsa::kScalar, rms_norm_impl, rope_neox_impl, silu_mul_impl};
  return table;
}

const ElementwiseKernels* elementwise_kernels_for(CpuIsa isa) {
  if (!cpu_has_isa(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::kScalar: return &scalar_elementwise_kernels();
    case CpuIsa::kAvx2: return avx2_elementwise_kernels();
    default: return nullptr;  // AVX-512 slots: no path yet
  }
}

const ElementwiseKernels& active_elementwise_kernels() {
  static const ElementwiseKernels* const table = [] {
    IsaSlots<ElementwiseKernels> slots;
    for (int level = 0; level < kCpuIsaLevels; ++level) {
      slots.by_level[level] = elementwise_kernels_for(static_cast<CpuIsa>(level));
    }
    return pick_isa_slot(slots, active_cpu_isa());
  }();
  return *table;
}

void rms_norm(const float* x, const float* weight, int64_t n, double eps, float* out) {
  active_elementwise_kernels().rms_norm(x, weight, n, eps, out);
}

void rope_neox(float* x, int64_t n_heads, int64_t head_dim, const float* cos_sin) {
  active_elementwise_kernels().rope_neox(x, n_heads, head_dim, cos_sin);
}

void silu_mul(float* gate, const float* up, int64_t n) { active_elementwise_kernels().silu_mul(gate, up, n); }

void rope_cos_sin(int64_t position, int64_t head_dim, double theta, float* cos_sin) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double angle = static_cast<double>(position) * inv_freq;
    cos_sin[i] = static_cast<float>(std::cos(angle));
    cos_sin[half + i] = static_cast<float>(std::sin(angle));
  }
}

}  // namespace qs::kernels
