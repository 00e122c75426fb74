// The AVX-512 VNNI and AMX matmul tables for kernel tests, or nullptr with the reason to skip.
#pragma once

#include <string>

#include "backend/cpu/kernels/cpu_isa.h"
#include "backend/cpu/kernels/dot_kernels.h"

namespace qs::test {

/// The avx512_vnni kernel table; nullptr (and *reason set) on a CPU or build without it.
inline const kernels::DotKernels* vnni_kernels_or_skip_reason(std::string* reason) {
  if (!kernels::cpu_has_isa(kernels::CpuIsa::kAvx512Vnni)) {
    *reason = "the CPU lacks AVX-512 F/BW/VL/VNNI: the avx512_vnni matmul kernels are not tested here";
    return nullptr;
  }
  const kernels::DotKernels* k = kernels::dot_kernels_for(kernels::CpuIsa::kAvx512Vnni);
  if (k == nullptr) *reason = "this build has no avx512_vnni matmul path (non-x86-64)";
  return k;
}

/// The amx kernel table; nullptr (and *reason set) on a CPU, OS or build without it.
inline const kernels::DotKernels* amx_kernels_or_skip_reason(std::string* reason) {
  if (!kernels::cpu_has_isa(kernels::CpuIsa::kAmx)) {
    *reason = "the CPU (or the OS) offers no AMX-INT8 tiles: the amx matmul kernels are not tested here";
    return nullptr;
  }
  const kernels::DotKernels* k = kernels::dot_kernels_for(kernels::CpuIsa::kAmx);
  if (k == nullptr) *reason = "this build has no amx matmul path (non-x86-64)";
  return k;
}

}  // namespace qs::test
