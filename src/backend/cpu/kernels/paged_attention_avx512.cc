// AVX-512 path of paged attention: paged_attention_impl.h compiled with AVX-512 F/BW/VL besides
// AVX2 + FMA + F16C (CMake gives every *_avx512.cc these flags). The F16/BF16 row conversions, the
// 4-head x 2-key score tiles and the PV accumulation run 16 floats per instruction; the softmax
// and the remainders keep the AVX2 code. Only reached through attention_kernels_for(kAvx512) or
// above, after detected_cpu_isa() confirmed the CPU has AVX-512 F/BW/VL.
#include "backend/cpu/kernels/paged_attention.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
    defined(__F16C__)
// GCC 12's AVX-512 headers start results from _mm512_undefined_*(), which -W(maybe-)uninitialized
// report at every inlined use (a known false positive, as in dot_avx512_vnni.cc).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "backend/cpu/kernels/paged_attention_impl.h"

namespace qs::kernels {
namespace {

float dot_f32_avx512(const float* a, const float* b, int64_t n) { return dot_f32(a, b, n); }
void dot4_f32_avx512(const float* x, const float* const rows[4], int64_t n, float out[4]) {
  dot4_f32(x, rows, n, out);
}

}  // namespace

const AttentionKernels* avx512_attention_kernels() {
  static const AttentionKernels table = {CpuIsa::kAvx512, attention_token_impl, attention_tile_impl,
                                         dot_f32_avx512, dot4_f32_avx512};
  return &table;
}

}  // namespace qs::kernels
#else
namespace qs::kernels {
const AttentionKernels* avx512_attention_kernels() { return nullptr; }
}  // namespace qs::kernels
#endif
