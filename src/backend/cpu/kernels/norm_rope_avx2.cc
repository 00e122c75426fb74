// AVX2 + FMA paths of the element-wise kernels: the loops of norm_rope_impl.h compiled with
// -mavx2 -mfma -mf16c (CMake sets these flags on *_avx2.cc), i.e. what -march=native builds ran.
#include "backend/cpu/kernels/norm_rope.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "backend/cpu/kernels/norm_rope_impl.h"

namespace qs::kernels {

const ElementwiseKernels* avx2_elementwise_kernels() {
  static const ElementwiseKernels table = {CpuIsa::kAvx2, rms_norm_impl, rope_neox_impl, silu_mul_impl};
  return &table;
}

}  // namespace qs::kernels
#else
namespace qs::kernels {
const ElementwiseKernels* avx2_elementwise_kernels() { return nullptr; }
}  // namespace qs::kernels
#endif
