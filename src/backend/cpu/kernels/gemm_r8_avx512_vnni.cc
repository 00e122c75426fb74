// Batch GEMM for Q8_0 weights at the AVX-512 VNNI level: 16 weight rows interleaved so that one
// 512-bit vector holds 4 consecutive elements of each of the 16 rows, multiplied with 512-bit
// vpdpbusd whose activation operand is a 4-byte broadcast straight from memory ({1to16}).
//
// vpdpbusd multiplies unsigned bytes by signed bytes. The weights stay signed; the activations
// arrive unsigned: matmul flips the sign bit of every quantized activation byte once per call
// (GroupGemm::unsigned_activations; a + 128 as uint8), so no instruction per use converts them
// (the 256-bit kernel this replaces spent a broadcast and an XOR per vpdpbusd: 3 vector uops per
// 32 products, here 1 per 64). A lane accumulates sum (a_i + 128) * w_i = sum a_i * w_i +
// 128 * sum w_i; the second term is a property of the weights: the repack stores corr[h][r] =
// -128 * (sum of the 16 weights of half h of row r) and every token's accumulator starts from it.
//
// Per block of 32 inputs and token: 8 vpdpbusd (16 rows each), 2 int->float conversions, 2 FMAs
// and one scale product; the 8 weight vectors are loaded once per block and reused by up to 8
// tokens (registers: 16 float accumulators, 8 int accumulators, weights and scales: 28 of 32).
//
// Exactness and bit-identity: each lane's int32 sum is exact (|a| <= 127 after quantization, so
// |(a + 128) * w| <= 255 * 128 and a 16-element half stays far below 2^31) and equals the exact
// half-block sum the AVX2 kernels form; the float sequence per (row, token) is theirs (acc_half =
// fma(d_w * d_a, float(sum_half), acc_half) over the blocks in order, y = acc_lo + acc_hi). So this
// GEMM, the AVX2 GEMM and the row-major tiles give bit-identical results, and matmul may pick any
// of them for any batch (KernelMatmul* tests check it on every level the CPU has).
#include <cstdint>
#include <cstring>

// GCC 12 reports the _mm512_undefined_*() pass-through operand inside _mm512_cvtepi32_ps as "may be
// used uninitialized" (GCC bug 105593, fixed in GCC 13): a false positive of the intrinsic header.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/gemm_r8_common.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)

namespace qs::kernels {
namespace {

using namespace r8;  // NOLINT(google-build-using-namespace): the shared helpers of gemm_r8_common.h

constexpr int kRows = 16;

// One 32-element Q8_0 block of 16 rows: q[v] lane r (4 bytes) holds elements 4v .. 4v + 3 of row
// r (signed); corr[h] lane r = -128 * sum of row r's weights in half h (elements 16h .. 16h + 15);
// d = the rows' scales. 704 bytes (11 cache lines).
struct Q80R16 {
  int8_t q[8][64];
  int32_t corr[2][kRows];
  float d[kRows];
};
static_assert(sizeof(Q80R16) == 704);

// Rows past n_rows repeat the last real row (group_row); their results are computed and dropped.
void repack_q8_0_r16(int64_t nb, const uint8_t* w, size_t w_stride, int n_rows, Q80R16* out) {
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i minus128 = _mm512_set1_epi32(-128);
  for (int64_t b = 0; b < nb; ++b) {
    Q80R16& o = out[b];
    __m256i lo[8], hi[8];
    for (int r = 0; r < 8; ++r) {
      const auto& x0 = reinterpret_cast<const BlockQ8_0*>(group_row(w, w_stride, n_rows, r))[b];
      const auto& x1 = reinterpret_cast<const BlockQ8_0*>(group_row(w, w_stride, n_rows, r + 8))[b];
      lo[r] = load256(x0.qs);
      hi[r] = load256(x1.qs);
      o.d[r] = _cvtsh_ss(x0.d);
      o.d[r + 8] = _cvtsh_ss(x1.d);
    }
    transpose8x8_epi32(lo);  // lo[v] lane r: elements 4v .. 4v + 3 of row r
    transpose8x8_epi32(hi);  // the same for rows 8 .. 15
    __m512i sum[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int v = 0; v < 8; ++v) {
      const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo[v]), hi[v], 1);
      _mm512_storeu_si512(o.q[v], q);
      sum[v / 4] = _mm512_dpbusd_epi32(sum[v / 4], ones, q);  // lane r += its 4 signed weights
    }
    for (int h = 0; h < 2; ++h) _mm512_storeu_si512(o.corr[h], _mm512_mullo_epi32(sum[h], minus128));
  }
}

inline __m512i bcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// NT tokens (1..8) against one repacked group; a[t] are sign-flipped (unsigned) activations.
template <int NT>
void q8_0_r16_tokens(int64_t nb, const Q80R16* w, const BlockQ8_0A* const* a, float* y, size_t y_stride,
                     int n_rows) {
  __m512 acc[2][NT];
  for (int t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q80R16& x = w[b];
    const __m512 d = _mm512_loadu_ps(x.d);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i c = _mm512_loadu_si512(x.corr[h]);
      __m512i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = c;
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int v = 4 * h + i;
        const __m512i q = _mm512_loadu_si512(x.q[v]);
        for (int t = 0; t < NT; ++t) s[t] = _mm512_dpbusd_epi32(s[t], bcast32(a[t][b].qs + 4 * v), q);
      }
      for (int t = 0; t < NT; ++t) {
        const __m512 scale = _mm512_mul_ps(d, _mm512_set1_ps(a[t][b].d));
        acc[h][t] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(s[t]), acc[h][t]);
      }
    }
  }
  const __mmask16 rows = n_rows >= kRows ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << n_rows) - 1);
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, rows, _mm512_add_ps(acc[0][t], acc[1][t]));
}

struct Q80R16Kernels {
  template <int NT>
  static void run(int64_t nb, const Q80R16* w, const BlockQ8_0A* const* a, float* y, size_t y_stride, int n_rows) {
    q8_0_r16_tokens<NT>(nb, w, a, y, y_stride, n_rows);
  }
};

// Crossover against the row-major VNNI tiles of this level (2026-12-02, Intel Xeon, 2 threads,
// a CI build running beside it). Microbench Gemm/Q8_0/tokens:N/threads:1 (2560 x 2560, weights
// L3-resident), builds with min_tokens 5 and 2: 2 tokens 0.35 ms row-major vs 0.45 repacked, 3
// tokens 0.51-0.54 vs 0.48, 4 tokens 0.57-0.60 vs 0.48. Whole 4B Q8_0 model (weights from DRAM,
// `bench -p 64 -n 0 --spec-verify 4 -t 2 -r 2`, two rounds each): 3 tokens 393 / 404 ms
// row-major vs 373 / 367 repacked, 4 tokens 340 / 375 vs 387 / 383. The per-call repack of weights
// streamed from DRAM costs more than the microbench shows, so 5 stays the threshold.
constexpr int kQ80R16MinTokens = 5;

}  // namespace

GroupGemm avx512_vnni_q8_0_group_gemm() {
  GroupGemm g;
  g.fn = group_gemm<Q80R16, BlockQ8_0A, kBlockQ8_0, 8, repack_q8_0_r16, Q80R16Kernels>;
  g.bytes_per_block = sizeof(Q80R16) * (kBlockK / kBlockQ8_0);
  g.min_tokens = kQ80R16MinTokens;
  g.rows = kRows;
  g.unsigned_activations = true;
  return g;
}

}  // namespace qs::kernels

#else
namespace qs::kernels {
GroupGemm avx512_vnni_q8_0_group_gemm() { return {}; }
}  // namespace qs::kernels
#endif
