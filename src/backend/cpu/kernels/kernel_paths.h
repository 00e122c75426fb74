// Which ISA path each CPU kernel family runs in this process (for `qwenserve info` and the
// server's startup line).
#pragma once

#include <string>

namespace qs::kernels {

/// One line naming the active path per family, e.g.
/// "cpu=avx512_bf16 matmul=avx2 attention=avx2 norm=avx2 rope=avx2 silu=avx2 convert=avx2":
/// `cpu` is the best level the CPU has, then the level each family's chosen table was compiled
/// for (after QS_CPU_ISA and the levels this build has paths for).
std::string cpu_kernel_paths();

}  // namespace qs::kernels
