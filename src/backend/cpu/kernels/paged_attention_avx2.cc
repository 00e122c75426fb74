// AVX2 + FMA + F16C path of paged attention: paged_attention_impl.h compiled with -mavx2 -mfma
// -mf16c (CMake sets these flags on *_avx2.cc), i.e. what -march=native builds ran.
#include "backend/cpu/kernels/paged_attention.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "backend/cpu/kernels/paged_attention_impl.h"

namespace qs::kernels {
namespace {

float dot_f32_avx2(const float* a, const float* b, int64_t n) { return dot_f32(a, b, n); }
void dot4_f32_avx2(const float* x, const float* const rows[4], int64_t n, float out[4]) {
  dot4_f32(x, rows, n, out);
}

}  // namespace

const AttentionKernels* avx2_attention_kernels() {
  static const AttentionKernels table = {CpuIsa::kAvx2, attention_token_impl, attention_tile_impl,
                                         dot_f32_avx2,
                                         dot4_f32_avx2};
  return &table;
}

}  // namespace qs::kernels
#else
namespace qs::kernels {
const AttentionKernels* avx2_attention_kernels() { return nullptr; }
}  // namespace qs::kernels
#endif
