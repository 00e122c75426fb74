// AVX2 + FMA + F16C path of dequantize_row: the decoders of dequantize_impl.h compiled with
// -mavx2 -mfma -mf16c (CMake sets these flags on *_avx2.cc).
#include "formats/dequantize_kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "formats/dequantize_impl.h"

namespace qs {

const DequantizeKernels* avx2_dequantize_kernels() {
  static const DequantizeKernels table = {CpuIsa::kAvx2, decode_row};
  return &table;
}

}  // namespace qs
#else
namespace qs {
const DequantizeKernels* avx2_dequantize_kernels() { return nullptr; }
}  // namespace qs
#endif
