#include "backend/cpu/kernels/cpu_isa.h"

#include <cstdlib>

namespace qs::kernels {

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view text) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (text == cpu_isa_name(isa)) return isa;
  }
  return std::nullopt;
}

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return CpuIsa::kAvx2;
  }
#endif
  return CpuIsa::kScalar;
}

CpuIsa select_cpu_isa(std::string_view override_text, CpuIsa detected) {
  const std::optional<CpuIsa> wanted = parse_cpu_isa(override_text);
  if (!wanted || static_cast<int>(*wanted) > static_cast<int>(detected)) return detected;
  return *wanted;
}

CpuIsa active_cpu_isa() {
  static const CpuIsa isa = [] {
    const char* env = std::getenv("QS_CPU_ISA");
    return select_cpu_isa(env != nullptr ? env : "", detected_cpu_isa());
  }();
  return isa;
}

}  // namespace qs::kernels
