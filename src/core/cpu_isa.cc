#include "core/cpu_isa.h"

#include <cstdlib>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace qs {

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kAvx512Vnni: return "avx512_vnni";
    case CpuIsa::kAvx512Bf16: return "avx512_bf16";
    case CpuIsa::kAmx: return "amx";
  }
  return "unknown";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view text) {
  for (int level = 0; level < kCpuIsaLevels; ++level) {
    const auto isa = static_cast<CpuIsa>(level);
    if (text == cpu_isa_name(isa)) return isa;
  }
  return std::nullopt;
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
namespace {
// F16C from CPUID leaf 1, ECX bit 29 (Intel SDM vol. 2A, table 3-10): clang 14's
// __builtin_cpu_supports does not know "f16c". The OS's saving of the YMM state that F16C needs is
// part of __builtin_cpu_supports("avx2"), which is checked with it.
bool cpuid_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 29)) != 0;
}

// AMX-TILE and AMX-INT8 from CPUID leaf 7 sub-leaf 0, EDX bits 24 and 25 (Intel SDM vol. 2A,
// table 3-8), and the tile data state (XSAVE component 18) granted to this process: Linux 5.16+
// keeps it off until arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, 18) asks for it (kernel
// Documentation/arch/x86/xstate.rst); the grant covers every thread of the process.
bool amx_int8_usable() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
}  // namespace
#endif

CpuIsa detected_cpu_isa() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuid_has_f16c())) {
    return CpuIsa::kScalar;
  }
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))) {
    return CpuIsa::kAvx2;
  }
  if (!__builtin_cpu_supports("avx512vnni")) return CpuIsa::kAvx512;
  if (!__builtin_cpu_supports("avx512bf16")) return CpuIsa::kAvx512Vnni;
  if (!amx_int8_usable()) return CpuIsa::kAvx512Bf16;
  return CpuIsa::kAmx;
#else
  return CpuIsa::kScalar;
#endif
}

bool cpu_has_isa(CpuIsa isa) {
  static const CpuIsa detected = detected_cpu_isa();
  return static_cast<int>(isa) <= static_cast<int>(detected);
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

}  // namespace qs
