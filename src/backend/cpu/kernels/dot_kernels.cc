#include "backend/cpu/kernels/dot_kernels.h"

#include <string>

#include "core/error.h"

namespace qs::kernels {

ActivationFormat activation_format(DType weight_dtype) {
  switch (weight_dtype) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return ActivationFormat::kF32;
    case DType::Q8_0:
    case DType::Q4_0: return ActivationFormat::kQ8_0A;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return ActivationFormat::kQ8_K;
  }
  throw Error("no CPU dot kernel for type " + std::string(dtype_name(weight_dtype)));
}

size_t activation_row_bytes(ActivationFormat format, int64_t n) {
  switch (format) {
    case ActivationFormat::kF32: return static_cast<size_t>(n) * sizeof(float);
    case ActivationFormat::kQ8_0A: return static_cast<size_t>(n / kBlockQ8_0) * sizeof(BlockQ8_0A);
    case ActivationFormat::kQ8_K: return static_cast<size_t>(n / kBlockK) * sizeof(BlockQ8_K);
  }
  return 0;
}

RowDotFn DotKernels::row_dot(DType dtype) const {
  switch (dtype) {
    case DType::F32: return f32;
    case DType::F16: return f16;
    case DType::BF16: return bf16;
    case DType::Q8_0: return q8_0;
    case DType::Q4_0: return q4_0;
    case DType::Q4_K: return q4_k;
    case DType::Q5_K: return q5_k;
    case DType::Q6_K: return q6_k;
  }
  throw Error("no CPU dot kernel for type " + std::string(dtype_name(dtype)));
}

const DotKernels* dot_kernels_for(CpuIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(detected_cpu_isa())) return nullptr;
  switch (isa) {
    case CpuIsa::kScalar: return &scalar_dot_kernels();
    case CpuIsa::kAvx2: return avx2_dot_kernels();
    case CpuIsa::kAvx512Vnni: return avx512_vnni_dot_kernels();
    case CpuIsa::kAmx: return amx_dot_kernels();
    default: return nullptr;  // avx512 and avx512_bf16: no own path (the slot below is used)
  }
}

const DotKernels& active_dot_kernels() {
  static const DotKernels* const table = [] {
    IsaSlots<DotKernels> slots;
    for (int level = 0; level < kCpuIsaLevels; ++level) {
      slots.by_level[level] = dot_kernels_for(static_cast<CpuIsa>(level));
    }
    return pick_isa_slot(slots, active_cpu_isa());
  }();
  return *table;
}

}  // namespace qs::kernels
