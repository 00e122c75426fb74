// The repacking GEMMs of gemm_r8_avx2.cc compiled a second time, with the AVX-512 VNNI level's
// flags (CMake: every *_avx512_vnni.cc), as dot_avx2_evex_avx512_vnni.cc does for the dot kernels:
// the same intrinsics (bit-identical results), but EVEX encodings and 32 vector registers, which
// the -march=native build of commit 2a92708 got for free. avx2_dot_kernels_evex() (the base of the
// avx512_vnni table) takes its Q4_K and Q6_K GEMMs from here; Q8_0 has its own VNNI GEMM.
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define QS_R8_GEMM(type) avx2_evex_##type##_group_gemm
#include "backend/cpu/kernels/gemm_r8_avx2.cc"  // NOLINT(bugprone-suspicious-include): compiled twice on purpose
#else
#include "backend/cpu/kernels/dot_kernels.h"
namespace qs::kernels {
GroupGemm avx2_evex_q4_k_group_gemm() { return {}; }
GroupGemm avx2_evex_q6_k_group_gemm() { return {}; }
GroupGemm avx2_evex_q8_0_group_gemm() { return {}; }
}  // namespace qs::kernels
#endif
