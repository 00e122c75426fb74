// The AVX2 dot kernels of dot_avx2.cc compiled a second time, with the AVX-512 VNNI level's flags
// (CMake gives every *_avx512_vnni.cc -mavx512f -mavx512bw -mavx512vl -mavx512vnni besides AVX2).
// The source is the same intrinsics, so every result is bit-identical to the AVX2 level's (the
// ISA tests compare the levels); what changes is the code the compiler may emit for them: EVEX
// encodings, 32 vector registers instead of 16 (the 4-row K-quant decode kernels keep more
// accumulators and scales in registers instead of spilling), AVX-512VL forms of 256-bit ops.
// The build of commit 2a92708 got these for free from -march=native; the portable build only gets
// them here, and avx512_vnni_dot_kernels() starts from this table (Q4_K and Q5_K decode, float
// dots, quantizers, and the Q4_K / Q6_K repacking GEMMs of gemm_r8_evex_avx512_vnni.cc). Only reached through dot_kernels_for(kAvx512Vnni), after detected_cpu_isa()
// confirmed the CPU has AVX-512 F/BW/VL/VNNI.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define QS_AVX2_DOT_TABLE avx2_dot_kernels_evex
#define QS_AVX2_GEMM(type) avx2_evex_##type##_group_gemm  // gemm_r8_evex_avx512_vnni.cc
#include "backend/cpu/kernels/dot_avx2.cc"  // NOLINT(bugprone-suspicious-include): compiled twice on purpose
#else
#include "backend/cpu/kernels/dot_kernels.h"
namespace qs::kernels {
const DotKernels* avx2_dot_kernels_evex() { return nullptr; }
}  // namespace qs::kernels
#endif
