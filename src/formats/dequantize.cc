// Scalar path of dequantize_row, the per-type reference decoders, and the per-ISA selection.
#include "formats/dequantize_kernels.h"

#include "formats/dequantize_impl.h"
#include "formats/quantize.h"

namespace qs {

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) { decode_q8_0(src, dst, n); }
void dequantize_row_q4_0(const void* src, float* dst, int64_t n) { decode_q4_0(src, dst, n); }
void dequantize_row_q4_k(const void* src, float* dst, int64_t n) { decode_q4_k(src, dst, n); }
void dequantize_row_q5_k(const void* src, float* dst, int64_t n) { decode_q5_k(src, dst, n); }
void dequantize_row_q6_k(const void* src, float* dst, int64_t n) { decode_q6_k(src, dst, n); }

const DequantizeKernels& scalar_dequantize_kernels() {
  static const DequantizeKernels table = {CpuIsa::kScalar, decode_row};
  return table;
}

const DequantizeKernels* dequantize_kernels_for(CpuIsa isa) {
  if (!cpu_has_isa(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::kScalar: return &scalar_dequantize_kernels();
    case CpuIsa::kAvx2: return avx2_dequantize_kernels();
    default: return nullptr;  // AVX-512 slots: no path yet
  }
}

const DequantizeKernels& active_dequantize_kernels() {
  static const DequantizeKernels* const table = [] {
    IsaSlots<DequantizeKernels> slots;
    for (int level = 0; level < kCpuIsaLevels; ++level) {
      slots.by_level[level] = dequantize_kernels_for(static_cast<CpuIsa>(level));
    }
    return pick_isa_slot(slots, active_cpu_isa());
  }();
  return *table;
}

}  // namespace qs
