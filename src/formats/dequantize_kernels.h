// Per-ISA paths of dequantize_row (the "convert" kernel family): decoding weight rows (token
// embeddings, float vectors) and f16 / bf16 rows to f32.
//
// dequantize_row (formats/dtype.h) validates its arguments and runs the path of active_cpu_isa():
// scalar (dequantize.cc) or AVX2 + FMA + F16C (dequantize_avx2.cc), both compiled from
// dequantize_impl.h. The paths agree bit for bit except Q4_K / Q5_K, where AVX2 rounds
// `step * q - shift` once (FMA) and scalar twice: |difference| <= 1 ulp of the element.
#pragma once

#include <cstdint>

#include "core/cpu_isa.h"
#include "formats/dtype.h"

namespace qs {

struct DequantizeKernels {
  CpuIsa isa;
  /// Decodes n elements of `dtype` (n a multiple of its block size) from src into dst [n] f32;
  /// returns false for a type it does not know.
  bool (*row)(DType dtype, const void* src, float* dst, int64_t n);
};

/// The kernels of one level, or nullptr when the CPU or the build lacks that level's path.
const DequantizeKernels* dequantize_kernels_for(CpuIsa isa);
/// The kernels dequantize_row runs (highest filled level <= active_cpu_isa()).
const DequantizeKernels& active_dequantize_kernels();

// Per-level tables; avx2_dequantize_kernels() is nullptr without an AVX2 build path and must only
// be called after cpu_has_isa(CpuIsa::kAvx2).
const DequantizeKernels& scalar_dequantize_kernels();
const DequantizeKernels* avx2_dequantize_kernels();

}  // namespace qs
