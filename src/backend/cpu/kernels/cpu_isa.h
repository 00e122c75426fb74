// Instruction-set levels of the CPU kernels and their runtime selection.
//
// The best level the CPU reports (__builtin_cpu_supports) is used unless the environment variable
// QS_CPU_ISA=scalar|avx2|avx512 asks for a lower one (tests use this to run every path). Asking for
// a level the CPU or the build lacks falls back to the best available level below it.
#pragma once

#include <optional>
#include <string_view>

namespace qs::kernels {

enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

std::string_view cpu_isa_name(CpuIsa isa);
/// "scalar" / "avx2" / "avx512" (case-sensitive); std::nullopt for anything else.
std::optional<CpuIsa> parse_cpu_isa(std::string_view text);

/// Highest level both the CPU and this build support (kAvx2 needs AVX2 + FMA + F16C; there is no
/// AVX-512 path yet, so this is at most kAvx2).
CpuIsa detected_cpu_isa();

/// The level to run given an override text (empty = none) and the detected level: the override
/// when it is <= detected, else `detected`; an unparsable override is ignored.
CpuIsa select_cpu_isa(std::string_view override_text, CpuIsa detected);

/// select_cpu_isa(getenv("QS_CPU_ISA"), detected_cpu_isa()), computed once per process.
CpuIsa active_cpu_isa();

}  // namespace qs::kernels
