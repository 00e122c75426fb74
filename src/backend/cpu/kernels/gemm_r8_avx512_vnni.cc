// Batch GEMM for Q8_0 weights at the AVX-512 VNNI level: the 8-row interleaved layout of
// gemm_r8_avx2.cc (one 256-bit vector = 4 consecutive elements of each of 8 rows), multiplied with
// vpdpbusd (AVX512-VNNI + VL, 256-bit) instead of abs/sign + maddubs + madd + add.
//
// vpdpbusd multiplies unsigned bytes by signed bytes. The weights stay signed; the activations are
// made unsigned by flipping their sign bit (a + 128, one XOR on the broadcast 4 bytes), so a lane
// accumulates sum (a_i + 128) * w_i = sum a_i * w_i + 128 * sum w_i. The second term is a property
// of the weights: the repack stores corr[h][r] = -128 * (sum of the 16 weights of half h of row r),
// and every token's accumulator starts from it. Per 32 products: a broadcast (load port), an XOR
// and one vpdpbusd, against four multiply-pipe uops on the AVX2 path.
//
// Exactness and bit-identity: each lane's int32 sum is exact (|a| <= 127 after quantization, so
// |(a + 128) * w| <= 255 * 128 and a 16-element half stays far below 2^31) and equals the exact
// half-block sum the AVX2 kernels form; the float sequence per (row, token) is theirs (acc_half =
// fma(d_w * d_a, float(sum_half), acc_half) over the blocks in order, y = acc_lo + acc_hi). So this
// GEMM, the AVX2 GEMM and the row-major tiles give bit-identical results, and matmul may pick any
// of them for any batch (KernelMatmul* tests check it on every level the CPU has).
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/gemm_r8_common.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)

namespace qs::kernels {
namespace {

using namespace r8;  // NOLINT(google-build-using-namespace): the shared helpers of gemm_r8_common.h

// One 32-element Q8_0 block of 8 rows: q[v] lane r holds elements 4v .. 4v + 3 of row r (signed);
// corr[h] lane r = -128 * sum of row r's weights in half h (elements 16h .. 16h + 15); d = scales.
struct alignas(32) Q80R8V {
  int8_t q[8][32];
  int32_t corr[2][8];
  float d[8];
};
static_assert(sizeof(Q80R8V) == 352);

void repack_q8_0_r8v(int64_t nb, const uint8_t* w, size_t w_stride, int n_rows, Q80R8V* out) {
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < nb; ++b) {
    Q80R8V& o = out[b];
    __m256i q[8];
    for (int r = 0; r < 8; ++r) {
      const auto& x = reinterpret_cast<const BlockQ8_0*>(group_row(w, w_stride, n_rows, r))[b];
      q[r] = load256(x.qs);
      o.d[r] = _cvtsh_ss(x.d);
    }
    transpose8x8_epi32(q);  // q[v] lane r: elements 4v .. 4v + 3 of row r
    for (int h = 0; h < 2; ++h) {
      __m256i sum = _mm256_setzero_si256();
      for (int v = 4 * h; v < 4 * h + 4; ++v) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.q[v]), q[v]);
        sum = _mm256_dpbusd_epi32(sum, ones, q[v]);  // lane r += the 4 signed weights
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.corr[h]), _mm256_mullo_epi32(sum, _mm256_set1_epi32(-128)));
    }
  }
}

// NT tokens (1..8) against one repacked group; the two halves of a block one after the other.
template <int NT>
void q8_0_r8v_tokens(int64_t nb, const Q80R8V* w, const BlockQ8_0A* const* a, float* y, size_t y_stride, int n_rows) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[2][NT];
  for (int t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q80R8V& x = w[b];
    const __m256 d = _mm256_load_ps(x.d);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.corr[h]));
      __m256i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = c;
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int v = 4 * h + i;
        __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.q[v]));
        pin(q);
        for (int t = 0; t < NT; ++t) {
          s[t] = _mm256_dpbusd_epi32(s[t], _mm256_xor_si256(bcast32(a[t][b].qs + 4 * v), flip), q);
          pin(s[t]);
        }
      }
      for (int t = 0; t < NT; ++t) {
        const __m256 scale = _mm256_mul_ps(d, _mm256_set1_ps(a[t][b].d));
        acc[h][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s[t]), acc[h][t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) store_rows(_mm256_add_ps(acc[0][t], acc[1][t]), n_rows, y + t * y_stride);
}

struct Q80VKernels {
  template <int NT>
  static void run(int64_t nb, const Q80R8V* w, const BlockQ8_0A* const* a, float* y, size_t y_stride, int n_rows) {
    q8_0_r8v_tokens<NT>(nb, w, a, y, y_stride, n_rows);
  }
};

// Crossover against the row-major tiles at this level (microbench Gemm/Q8_0/tokens:N/threads:1,
// 2560 x 2560, two interleaved rounds of builds with thresholds 8 and 4): 5 tokens 0.78-0.95 ->
// 0.54-0.61 ms, 6 tokens 1.02-1.24 -> 0.57-0.64 ms; 4 tokens 0.68-0.69 vs 0.46-0.70 (undecided,
// and a per-call repack of weights streamed from DRAM costs more than in this L3-resident test).
constexpr int kQ80VMinTokens = 5;

}  // namespace

GroupGemm avx512_vnni_q8_0_group_gemm() {
  return {group_gemm<Q80R8V, BlockQ8_0A, kBlockQ8_0, 8, repack_q8_0_r8v, Q80VKernels>,
          sizeof(Q80R8V) * (kBlockK / kBlockQ8_0), kQ80VMinTokens};
}

}  // namespace qs::kernels

#else
namespace qs::kernels {
GroupGemm avx512_vnni_q8_0_group_gemm() { return {}; }
}  // namespace qs::kernels
#endif
