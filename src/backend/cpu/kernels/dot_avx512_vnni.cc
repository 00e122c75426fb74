// AVX-512 VNNI kernels: Q8_0 decode (4 weight rows x 1 token) and tails, Q6_K 2-3-token tails.
// CMake compiles *_avx512_vnni.cc files with -mavx512f -mavx512bw -mavx512vl -mavx512vnni
// (+ AVX2/FMA/F16C); only reached through dot_kernels_for(kAvx512Vnni) after detected_cpu_isa() confirmed the CPU has them.
//
// Exactness and batch invariance: per (row, token, block) these kernels form the SAME exact int32
// totals as the AVX2 kernels of dot_avx2.cc (integer sums in another order are the same integers)
// and then the SAME float sequence (Q8_0: acc = fma(d_w * d_a, float(half-block sum), acc) per
// 16-element half, y = acc_low + acc_high; K-quants: acc = fma(d_w * d_a, float(total), acc) per
// super-block). So every result is bit-identical to the AVX2 level's, and the
// AVX2 4-token tiles and repacking GEMMs (which already match the AVX2 decode kernels bit for bit)
// are reused unchanged for batches: results do not depend on the token grouping.
//
// Where VNNI saves uops (Zen 4 runs 512-bit ops as two 256-bit halves, so the gain is in uops
// issued per weight byte, not in lanes):
//  - Q8_0 (signed x signed): vpdpbusd takes an unsigned operand, so the weights are flipped to
//    w + 128 (xor 0x80) and 128 * sum(a) per 4-group is subtracted by starting the accumulator at
//    -dpbusd(128, a), computed once per activation block for the 4 rows. Two rows per zmm: xor +
//    dpbusd per 64 weight bytes instead of abs, sign, maddubs, madd per 32.
//  - Q4_K stays on the AVX2 kernels: a 512-bit version (64 nibble bytes = 4 sub-blocks per zmm,
//    maddubs + vpdpwssd, in commit 90a7eb7) was exact but measured no faster, likely slower (2-vCPU
//    Zen 4, heavily loaded: GEMV 9728 x 2560 at 1 thread, CPU-time median 0.83x of AVX2).
//  - Q6_K: 2-3-token tails with vpdpwssd in place of madd + add (256-bit); the one-token decode
//    kernel is the AVX2 one (a vpdpwssd version measured slower in the model).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/dot_kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

// GCC 12's AVX-512 headers start insert/broadcast results from _mm512_undefined_*(), which
// -W(maybe-)uninitialized report at every inlined use (a known false positive). Clang (the
// sanitizer build) has no -Wmaybe-uninitialized.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace qs::kernels {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Same prefetch policy as dot_avx2.cc (see kL1PrefetchDistance there).
constexpr int64_t kL1PrefetchDistance = 9000;

template <int kLines>
inline void prefetch_lines(const char* p, bool to_l2) {
  if (to_l2) {
    for (int i = 0; i < kLines; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T1);
  } else {
    for (int i = 0; i < kLines; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T0);
  }
}

inline uint64_t gather4_u16(const void* p0, const void* p1, const void* p2, const void* p3) {
  uint16_t v[4];
  std::memcpy(&v[0], p0, 2);
  std::memcpy(&v[1], p1, 2);
  std::memcpy(&v[2], p2, 2);
  std::memcpy(&v[3], p3, 2);
  return v[0] | uint64_t{v[1]} << 16 | uint64_t{v[2]} << 32 | uint64_t{v[3]} << 48;
}

// Lane k (k < 4): sum of the low 128-bit half of p_k; lane 4 + k: of its high half (exact ints).
inline __m256i pack4_halfsums(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
  const __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

inline __m128i pack4_totals(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i v = pack4_halfsums(p0, p1, p2, p3);
  return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// --- Q8_0: 4 rows x 1 token ---------------------------------------------------------------------
//
// Per block: zmm w01 = [row 0 | row 1], w23 = [row 2 | row 3] (32 int8 each), the activation block
// in both halves. p = dpbusd(-128 * quad sums of a, w ^ 0x80, a) holds, per 4-element quad, the
// exact int32 sum of w * a ((w + 128) in 0..255 times a in -128..127, 4 terms: |sum| < 2^17). The
// quads are reduced to the 16-element half sums [r0lo r1lo r2lo r3lo r0hi r1hi r2hi r3hi], the lane
// layout of dot_avx2.cc's q8_0_x4_rows, and the float steps are those of that kernel.
void q8_0_x4_rows(int64_t nb, const BlockQ8_0* const* x, const BlockQ8_0A* a, float* y, int n_rows,
                  const char* next) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i pick = _mm512_setr_epi32(0, 8, 1, 9, 4, 12, 5, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const char* pf = next + b * 4 * static_cast<int64_t>(sizeof(BlockQ8_0));
    _mm_prefetch(pf, _MM_HINT_T0);
    _mm_prefetch(pf + 64, _MM_HINT_T0);
    _mm_prefetch(pf + 128, _MM_HINT_T0);
    const __m512i av = _mm512_broadcast_i64x4(load256(a[b].qs));
    const __m512i neg = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, av));
    const __m512i w01 = _mm512_inserti64x4(_mm512_castsi256_si512(load256(x[0][b].qs)), load256(x[1][b].qs), 1);
    const __m512i w23 = _mm512_inserti64x4(_mm512_castsi256_si512(load256(x[2][b].qs)), load256(x[3][b].qs), 1);
    const __m512i p01 = _mm512_dpbusd_epi32(neg, _mm512_xor_si512(w01, flip), av);
    const __m512i p23 = _mm512_dpbusd_epi32(neg, _mm512_xor_si512(w23, flip), av);
    // Per 128-bit lane j: element 4j = quad j of p01 summed, 4j + 1 = quad j of p23 summed.
    __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi32(p01, p23), _mm512_unpackhi_epi32(p01, p23));
    s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
    const __m256i v = _mm512_castsi512_si256(_mm512_permutexvar_epi32(pick, s));
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(gather4_u16(&x[0][b].d, &x[1][b].d, &x[2][b].d, &x[3][b].d))));
    const __m128 scale = _mm_mul_ps(dw, _mm_set1_ps(a[b].d));
    acc = _mm256_fmadd_ps(_mm256_set_m128(scale, scale), _mm256_cvtepi32_ps(v), acc);
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  for (int k = 0; k < n_rows; ++k) y[k] = l[k] + l[k + 4];
}

// The 128 6-bit levels (0..63) of half h of a Q6_K block as 4 vectors of 32 bytes: q[g] holds
// elements 128h + 32g .. 128h + 32g + 31 (low 4 bits from ql, top 2 from qh). Shared by the one-
// and multi-token kernels below.
inline void unpack_q6_k_half(const BlockQ6_K& xb, int h, __m256i low_mask, __m256i high_bits, __m256i q[4]) {
  const __m256i l0 = load256(xb.ql + 64 * h), l1 = load256(xb.ql + 64 * h + 32);
  const __m256i hb = load256(xb.qh + 32 * h);
  q[0] = _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_and_si256(_mm256_slli_epi16(hb, 4), high_bits));
  q[1] = _mm256_or_si256(_mm256_and_si256(l1, low_mask), _mm256_and_si256(_mm256_slli_epi16(hb, 2), high_bits));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask), _mm256_and_si256(hb, high_bits));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask), _mm256_and_si256(_mm256_srli_epi16(hb, 2), high_bits));
}

// --- Q6_K: 4 rows x 2-3 tokens ------------------------------------------------------------------
//
// One token (decode) stays on dot_avx2.cc's q6_k_x4_rows (vnni_tile sends it to the AVX2 table):
// a vpdpwssd version of it was exact but slower in the model (Q4_K_M decode at 1 thread, with
// QS_CPU_ISA=avx2 vs this level, interleaved pairs; in the L3-resident microbench Gemm/Q6_K/tokens:1
// 0.208-0.226 ms vs 0.199-0.201 ms).
// 4 Q6_K rows x NT tokens (NT = 2 or 3: token tails of verify steps and small batches): each
// row's 6-bit levels and scales are unpacked once for the NT tokens. Per (row, token) the same
// exact int32 total and the same float step as dot_avx2.cc's q6_k_x4_rows, so results are
// bit-identical to NT one-token calls.
template <int NT>
void q6_k_x4_rows_multi(int64_t nb, const BlockQ6_K* const* x, const BlockQ8_K* const* a, float* const* y, int n_rows,
                        const char* next) {
  static_assert(NT >= 2 && NT <= 3);
  const __m256i low_mask = _mm256_set1_epi8(0x0F), high_bits = _mm256_set1_epi8(0x30);
  const bool to_l2 = 4 * nb * static_cast<int64_t>(sizeof(BlockQ6_K)) > kL1PrefetchDistance;
  __m128 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_lines<14>(next + b * 4 * static_cast<int64_t>(sizeof(BlockQ6_K)), to_l2);
    __m256i neg_bsums[NT];
    for (int t = 0; t < NT; ++t) neg_bsums[t] = _mm256_sub_epi16(_mm256_setzero_si256(), load256(a[t][b].bsums));
    __m256i sumi[NT][4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const BlockQ6_K& xb = x[r][b];
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.scales)));
      const __m256i sc32 = _mm256_slli_epi16(sc16, 5);
      __m256i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm256_madd_epi16(sc32, neg_bsums[t]);
      for (int h = 0; h < 2; ++h) {
        const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
        __m256i q[4];
        unpack_q6_k_half(xb, h, low_mask, high_bits, q);
        for (int g = 0; g < 4; ++g) {
          const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g + 1))),
                                                _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g))));
          const __m256i scale = _mm256_shuffle_epi8(sc_h, pick);
          for (int t = 0; t < NT; ++t) {
            s[t] = _mm256_dpwssd_epi32(s[t], _mm256_maddubs_epi16(q[g], load256(a[t][b].qs + 128 * h + 32 * g)), scale);
          }
        }
      }
      for (int t = 0; t < NT; ++t) sumi[t][r] = s[t];
    }
    const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(gather4_u16(&x[0][b].d, &x[1][b].d, &x[2][b].d, &x[3][b].d))));
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm_fmadd_ps(_mm_mul_ps(d, _mm_set1_ps(a[t][b].d)),
                            _mm_cvtepi32_ps(pack4_totals(sumi[t][0], sumi[t][1], sumi[t][2], sumi[t][3])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    alignas(16) float l[4];
    _mm_store_ps(l, acc[t]);
    for (int r = 0; r < n_rows; ++r) y[t][r] = l[r];
  }
}

// Token tails of a 4-row group. Q6_K: 2-3 tokens in one pass (one token goes to the AVX2 table, see
// vnni_tile); Q8_0: 1-3 tokens, one token at a time.
void q6_k_tail(int64_t nb, const BlockQ6_K* const* x, const uint8_t* act, size_t act_stride, int n_tok, float* y,
               size_t y_stride, int n_rows, const char* next) {
  const BlockQ8_K* a[3];
  float* yt[3];
  for (int t = 0; t < n_tok; ++t) {
    a[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    yt[t] = y + t * y_stride;
  }
  switch (n_tok) {
    case 2: q6_k_x4_rows_multi<2>(nb, x, a, yt, n_rows, next); break;
    case 3: q6_k_x4_rows_multi<3>(nb, x, a, yt, n_rows, next); break;
    default: break;
  }
}

void q8_0_tail(int64_t nb, const BlockQ8_0* const* x, const uint8_t* act, size_t act_stride, int n_tok, float* y,
               size_t y_stride, int n_rows, const char* next) {
  for (int t = 0; t < n_tok; ++t) {
    q8_0_x4_rows(nb, x, reinterpret_cast<const BlockQ8_0A*>(act + t * act_stride), y + t * y_stride, n_rows, next);
  }
}

// --- tiles -------------------------------------------------------------------------------------
//
// TileDotFn: the first n_act & ~3 tokens through the AVX2 table's tile (4-token groups, bit-identical
// per pair to the kernels here), the remaining 1-3 tokens (the one token of decode) 4 rows at a
// time through kTail; with kOneTokenOnAvx2 a lone remaining token goes to the AVX2 tile as well.
// Every (row, token) result is the same whichever path computed it.
template <typename Block, int kBlockElems,
          void (*kTail)(int64_t, const Block* const*, const uint8_t*, size_t, int, float*, size_t, int, const char*),
          TileDotFn DotKernels::*kAvx2Tile, bool kOneTokenOnAvx2>
void vnni_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act, size_t act_stride, int n_act,
               float* y, size_t y_stride) {
  const int n4 = n_act & ~3;
  const int n_avx2 = kOneTokenOnAvx2 && n_act - n4 == 1 ? n_act : n4;
  if (n_avx2 > 0) (avx2_dot_kernels_evex()->*kAvx2Tile)(n, w, w_stride, n_rows, act, act_stride, n_avx2, y, y_stride);
  if (n_avx2 == n_act) return;
  const int64_t nb = n / kBlockElems;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(act);
  for (int r0 = 0; r0 < n_rows; r0 += 4) {
    const int rows = n_rows - r0 < 4 ? n_rows - r0 : 4;
    const char* next = reinterpret_cast<const char*>(wb + (r0 + 4) * w_stride);
    const Block* x[4];
    for (int i = 0; i < 4; ++i) x[i] = reinterpret_cast<const Block*>(wb + (r0 + (i < rows ? i : rows - 1)) * w_stride);
    kTail(nb, x, ab + n4 * act_stride, act_stride, n_act - n4, y + n4 * y_stride + r0, y_stride, rows, next);
  }
}

constexpr TileDotFn q8_0_tile = vnni_tile<BlockQ8_0, kBlockQ8_0, q8_0_tail, &DotKernels::q8_0_tile, false>;
constexpr TileDotFn q6_k_tile = vnni_tile<BlockQ6_K, kBlockK, q6_k_tail, &DotKernels::q6_k_tile, true>;

template <TileDotFn kTile>
void row_dot(int64_t n, const void* w, const void* act, size_t stride, int n_act, float* out) {
  kTile(n, w, 0, 1, act, stride, n_act, out, 1);
}

}  // namespace

const DotKernels* avx512_vnni_dot_kernels() {
  const DotKernels* avx2 = avx2_dot_kernels_evex();
  if (avx2 == nullptr) return nullptr;
  static const DotKernels table = [avx2] {
    // Float, Q4_0, Q4_K, Q5_K dots, quantizers and the Q4_K / Q6_K repacking GEMMs: the AVX2
    // kernels as compiled with this level's flags (dot_avx2_evex_avx512_vnni.cc).
    DotKernels t = *avx2;
    t.isa = CpuIsa::kAvx512Vnni;
    t.q8_0 = row_dot<q8_0_tile>;
    t.q6_k = row_dot<q6_k_tile>;
    t.q8_0_tile = q8_0_tile;
    t.q6_k_tile = q6_k_tile;
    t.q8_0_gemm = avx512_vnni_q8_0_group_gemm();
    t.q4_k_packed = avx512_vnni_packed_gemm(DType::Q4_K);
    t.q6_k_packed = avx512_vnni_packed_gemm(DType::Q6_K);
    t.q8_0_packed = avx512_vnni_packed_gemm(DType::Q8_0);
    return t;
  }();
  return &table;
}

}  // namespace qs::kernels

#else
namespace qs::kernels {
const DotKernels* avx512_vnni_dot_kernels() { return nullptr; }
}  // namespace qs::kernels
#endif
