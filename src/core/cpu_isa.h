// Instruction-set levels of the CPU kernels, their detection, and the choice of one path per
// kernel family at run time.
//
// Levels form a chain; each includes the ones below it:
//   scalar       any x86-64 (SSE2) or non-x86 CPU
//   avx2         AVX2 + FMA + F16C
//   avx512       + AVX-512 F/BW/VL
//   avx512_vnni  + AVX-512 VNNI
//   avx512_bf16  + AVX-512 BF16
//   amx          + AMX-TILE and AMX-INT8, with the tile data state granted by the OS (Linux:
//                arch_prctl(ARCH_REQ_XCOMP_PERM), requested by detected_cpu_isa())
// A kernel family (matmul, attention, norms, ...) fills one slot per level it has a path for
// (IsaSlots); the scalar slot is always filled. At start each family takes the filled slot of the
// highest level <= active_cpu_isa(). The active level is the best level the CPU reports
// (__builtin_cpu_supports) unless the environment variable QS_CPU_ISA names a lower one (tests and
// CI run every path this way); a level above the CPU's falls back to the CPU's, an unknown name is
// ignored.
//
// Code for a level above scalar lives only in files named *_<level>.cc (e.g. dot_avx2.cc), which
// CMake compiles with that level's flags; those files are entered only through a slot chosen here,
// so the binary never executes an instruction the CPU lacks.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace qs {

enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3, kAvx512Bf16 = 4, kAmx = 5 };
inline constexpr int kCpuIsaLevels = 6;

/// "scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx".
std::string_view cpu_isa_name(CpuIsa isa);
/// The level named `text` (case-sensitive, as cpu_isa_name); std::nullopt for anything else.
std::optional<CpuIsa> parse_cpu_isa(std::string_view text);

/// Highest level whose features the CPU reports (kScalar on non-x86 or non-GNU compilers).
CpuIsa detected_cpu_isa();

/// Whether the CPU has every feature of `isa` (level <= detected_cpu_isa()).
bool cpu_has_isa(CpuIsa isa);

/// The level to run given an override text (empty = none) and the detected level: the override
/// when it is <= detected, else `detected`; an unparsable override is ignored.
CpuIsa select_cpu_isa(std::string_view override_text, CpuIsa detected);

/// select_cpu_isa(getenv("QS_CPU_ISA"), detected_cpu_isa()), computed once per process.
CpuIsa active_cpu_isa();

/// One kernel family's paths, one slot per level (nullptr: no path at that level). `T` is the
/// family's table of function pointers; slot kScalar must be filled.
template <typename T>
struct IsaSlots {
  std::array<const T*, kCpuIsaLevels> by_level{};
};

/// The filled slot of the highest level <= `max_level` (the scalar slot if nothing above).
template <typename T>
const T* pick_isa_slot(const IsaSlots<T>& slots, CpuIsa max_level) {
  for (int level = static_cast<int>(max_level); level > 0; --level) {
    if (slots.by_level[level] != nullptr) return slots.by_level[level];
  }
  return slots.by_level[0];
}

}  // namespace qs
