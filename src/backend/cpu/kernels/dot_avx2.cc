// AVX2 + FMA + F16C dot kernels. CMake compiles *_avx2.cc files with -mavx2 -mfma -mf16c (the rest
// of the binary stays baseline x86-64); only reached through dot_kernels_for() after
// detected_cpu_isa() confirmed the CPU has them. Without those flags (non-x86 builds) the table is
// empty.
//
// Integer dots use the ggml trick for signed int8 x int8 on AVX2: _mm256_maddubs_epi16 takes an
// unsigned and a signed operand, so w * a = |w| * (a * sign(w)); pairs stay below 2 * 128 * 127
// and never saturate. Unsigned K-quant levels (0..63) go into maddubs directly; their offsets
// (Q4_K/Q5_K mins, Q6_K's -32) are applied through the activation block sums.
//
// Memory traffic per weight element: Q8_0 1.06 B, Q4_0 0.56 B, Q4_K 0.56 B, Q5_K 0.69 B,
// Q6_K 0.82 B; decode (one token) is bound by streaming these bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/dot_kernels.h"
#include "formats/quantize.h"

// The name of the table this file defines: avx2_dot_kernels, or avx2_dot_kernels_evex when
// dot_avx2_evex_avx512_vnni.cc compiles this file again with the AVX-512 level's flags.
#ifndef QS_AVX2_DOT_TABLE
#define QS_AVX2_DOT_TABLE avx2_dot_kernels
#define QS_AVX2_GEMM(type) avx2_##type##_group_gemm
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define QS_HAVE_AVX2_PATH 1
#include <immintrin.h>

namespace qs::kernels {
namespace {

// Helpers of the one-token K-quant decode kernels that the multi-token kernels share. They are
// forced inline: with plain `inline`, GCC's inlining heuristics depend on how many functions of this
// file use a helper, and adding the multi-token tails (q4_k_x4_rows_multi) changed the register
// allocation of q4_k_x4_rows itself (same instructions, GPR row pointers moved through xmm
// registers): Q4_K_M decode at 1 thread fell to ~0.75x of the seam commit a934b82 (8 interleaved
// pairs). Forced inline gives q4_k_x4_rows the same code as before the tails (objdump identical).
#define QS_HOT_INLINE __attribute__((always_inline)) inline

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }


// --- float weights ----------------------------------------------------------------------------

inline __m256 load8_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
inline __m256 load8_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_bf16(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
inline float scalar_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float scalar_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}
inline float scalar_bf16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return bf16_to_fp32(h);
}

// One weight row against NT f32 activation rows; each 8-element weight vector is converted once.
// Per token: 16-element steps into acc0 / acc1, one 8-element step into acc0, hsum(acc0 + acc1),
// then the scalar tail -- the same sequence for every NT.
template <int kBytes, __m256 (*kLoad8)(const uint8_t*), float (*kLoad1)(const uint8_t*), int NT>
void dot_float(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
  const float* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = reinterpret_cast<const float*>(act + t * stride);
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = kLoad8(w + kBytes * i), w1 = kLoad8(w + kBytes * (i + 8));
    for (int t = 0; t < NT; ++t) {
      acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a[t] + i), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a[t] + i + 8), acc1[t]);
    }
  }
  if (i + 8 <= n) {
    const __m256 w0 = kLoad8(w + kBytes * i);
    for (int t = 0; t < NT; ++t) acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a[t] + i), acc0[t]);
    i += 8;
  }
  for (int t = 0; t < NT; ++t) {
    float sum = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));
    for (int64_t j = i; j < n; ++j) sum += kLoad1(w + kBytes * j) * a[t][j];
    out[t] = sum;
  }
}

// --- Q8_0 / Q4_0 x Q8_0A ----------------------------------------------------------------------

inline __m256i load_q8_0(const BlockQ8_0& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
}

// Low nibbles are elements 0..15, high nibbles 16..31; centred to -8..7.
inline __m256i load_q4_0(const BlockQ4_0& b) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), _mm_and_si128(bytes, mask));
  return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

// One weight row against NT activation rows: each weight block is loaded and prepared once and
// used for every token. Per token the accumulation is the same sequence of operations whatever
// NT is (even blocks into acc0, odd into acc1, then hsum(acc0 + acc1)), so results do not depend
// on how tokens are grouped.
template <typename Block, __m256i (*kLoad)(const Block&), int NT>
void dot_block32(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
  const auto* x = reinterpret_cast<const Block*>(w);
  const BlockQ8_0A* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = reinterpret_cast<const BlockQ8_0A*>(act + t * stride);
  const int64_t nb = n / kBlockQ8_0;
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  auto step = [&](int64_t b, __m256* acc) {
    const __m256i q = kLoad(x[b]);
    const __m256i q_abs = _mm256_sign_epi8(q, q);
    const float d = half_to_float(x[b].d);
    for (int t = 0; t < NT; ++t) {
      const __m256i y = _mm256_sign_epi8(load256(a[t][b].qs), q);
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q_abs, y), _mm256_set1_epi16(1));
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * a[t][b].d), _mm256_cvtepi32_ps(p), acc[t]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, acc0);
    step(b + 1, acc1);
  }
  if (b < nb) step(b, acc0);
  for (int t = 0; t < NT; ++t) out[t] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));
}

// --- Q8_0 register-blocked tiles -------------------------------------------------------------
//
// Per (row, token) pair and Q8_0 block the exact int32 products of the block's low and high 16
// elements are formed in the integer domain and four pairs share one float vector: lane k holds
// pair k's low half, lane k + 4 its high half. So the int->float conversion, the scale product
// (d_w * d_a, one IEEE multiply per lane) and the fused multiply-add are paid once per 4 pairs
// instead of once per pair, and per pair only sign / maddubs / madd remain. Per lane the float
// sequence is acc = fma(d_w * d_a, float(int_half), acc) over the blocks in order, then
// y = acc_low + acc_high -- identical whichever 4 pairs share a vector (4 tokens of one row in
// prefill, 4 rows of one token in decode), so results are bit-identical for any token grouping.

// Exact int32 products of one Q8_0 block (q, |q|) with 32 activation int8, as 8 int32 lanes.
inline __m256i q8_pair(__m256i q_abs, __m256i q, const int8_t* a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q_abs, _mm256_sign_epi8(load256(a), q)), _mm256_set1_epi16(1));
}

// Lane k (k < 4): sum of the low 128-bit half of p_k; lane 4 + k: of its high half (exact ints).
QS_HOT_INLINE __m256i pack4_halfsums(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
  const __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

inline __m256 dup128(__m128 v) { return _mm256_set_m128(v, v); }

// Writes lane k + lane k + 4 of acc to out[k * stride] for k < n.
inline void store_pairs(__m256 acc, int n, float* out, size_t stride) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  for (int k = 0; k < n; ++k) out[k * stride] = l[k] + l[k + 4];
}

// R weight rows x 4 tokens (prefill): each weight block is loaded and |q| formed once for 4
// tokens; the 4 tokens' activation blocks (4 x 36 B per block step) stay in L1 across the R rows.
// R = 4 keeps 4 accumulators + the block's temporaries within the 16 ymm registers.
template <int R>
void q8_0_rows_x4(int64_t nb, const BlockQ8_0* const* x, const BlockQ8_0A* const* a, float* y,
                  size_t y_stride, int n_tok, const char* next) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const char* pf = next + b * 4 * static_cast<int64_t>(sizeof(BlockQ8_0));  // as in q8_0_x4_rows
    _mm_prefetch(pf, _MM_HINT_T0);
    _mm_prefetch(pf + 64, _MM_HINT_T0);
    _mm_prefetch(pf + 128, _MM_HINT_T0);
    const __m128 da = _mm_setr_ps(a[0][b].d, a[1][b].d, a[2][b].d, a[3][b].d);
    for (int r = 0; r < R; ++r) {
      const __m256i q = load_q8_0(x[r][b]);
      const __m256i qa = _mm256_sign_epi8(q, q);
      const __m256i v = pack4_halfsums(q8_pair(qa, q, a[0][b].qs), q8_pair(qa, q, a[1][b].qs),
                                       q8_pair(qa, q, a[2][b].qs), q8_pair(qa, q, a[3][b].qs));
      const __m128 scale = _mm_mul_ps(_mm_set1_ps(half_to_float(x[r][b].d)), da);
      acc[r] = _mm256_fmadd_ps(dup128(scale), _mm256_cvtepi32_ps(v), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_pairs(acc[r], n_tok, y + r, y_stride);
}

// 4 weight rows x 1 token (decode and token tails): the activation block is loaded once for 4
// rows. Four short interleaved row streams (2.7 KB each at in = 2560) are too short for the
// hardware prefetcher to train on, so the next `prefetch_bytes` bytes at `next` (the following
// rows, contiguous in memory) are prefetched linearly at the rate the 4 rows are consumed.
void q8_0_x4_rows(int64_t nb, const BlockQ8_0* const* x, const BlockQ8_0A* a, float* y, int n_rows,
                  const char* next) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const char* pf = next + b * 4 * static_cast<int64_t>(sizeof(BlockQ8_0));
    _mm_prefetch(pf, _MM_HINT_T0);
    _mm_prefetch(pf + 64, _MM_HINT_T0);
    _mm_prefetch(pf + 128, _MM_HINT_T0);
    __m256i p[4];
    for (int r = 0; r < 4; ++r) {
      const __m256i q = load_q8_0(x[r][b]);
      p[r] = q8_pair(_mm256_sign_epi8(q, q), q, a[b].qs);
    }
    const __m256i v = pack4_halfsums(p[0], p[1], p[2], p[3]);
    const __m128 dw = _mm_cvtph_ps(_mm_setr_epi16(static_cast<int16_t>(x[0][b].d), static_cast<int16_t>(x[1][b].d),
                                                  static_cast<int16_t>(x[2][b].d), static_cast<int16_t>(x[3][b].d),
                                                  0, 0, 0, 0));
    const __m128 scale = _mm_mul_ps(dw, _mm_set1_ps(a[b].d));
    acc = _mm256_fmadd_ps(dup128(scale), _mm256_cvtepi32_ps(v), acc);
  }
  store_pairs(acc, n_rows, y, 1);
}

// TileDotFn for Q8_0: rows in groups of 4 (outer, so 4 rows' blocks stay in L1), tokens in groups
// of 4 through q8_0_rows_x4, the remaining tokens one at a time through q8_0_x4_rows.
void q8_0_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act, size_t act_stride,
               int n_act, float* y, size_t y_stride) {
  const int64_t nb = n / kBlockQ8_0;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(act);
  for (int r0 = 0; r0 < n_rows; r0 += 4) {
    const int rows = n_rows - r0 < 4 ? n_rows - r0 : 4;
    const char* next = reinterpret_cast<const char*>(wb + (r0 + 4) * w_stride);
    const BlockQ8_0* x[4];
    for (int i = 0; i < 4; ++i) {
      x[i] = reinterpret_cast<const BlockQ8_0*>(wb + (r0 + (i < rows ? i : rows - 1)) * w_stride);
    }
    int t0 = 0;
    for (; t0 + 4 <= n_act; t0 += 4) {
      const BlockQ8_0A* a[4];
      for (int i = 0; i < 4; ++i) a[i] = reinterpret_cast<const BlockQ8_0A*>(ab + (t0 + i) * act_stride);
      float* yt = y + t0 * y_stride + r0;
      switch (rows) {
        case 4: q8_0_rows_x4<4>(nb, x, a, yt, y_stride, 4, next); break;
        case 3: q8_0_rows_x4<3>(nb, x, a, yt, y_stride, 4, next); break;
        case 2: q8_0_rows_x4<2>(nb, x, a, yt, y_stride, 4, next); break;
        default: q8_0_rows_x4<1>(nb, x, a, yt, y_stride, 4, next); break;
      }
    }
    for (; t0 < n_act; ++t0) {
      q8_0_x4_rows(nb, x, reinterpret_cast<const BlockQ8_0A*>(ab + t0 * act_stride), y + t0 * y_stride + r0, rows, next);
    }
  }
}

// RowDotFn for Q8_0: one row through the tile kernel (same per-pair arithmetic).
void q8_0_row_dot(int64_t n, const void* w, const void* act, size_t stride, int n_act, float* out) {
  q8_0_tile(n, w, 0, 1, act, stride, n_act, out, 1);
}

// --- K-quants x Q8_K --------------------------------------------------------------------------

// sum_j m[j] * (bsums[2j] + bsums[2j + 1]) for the 8 sub-blocks of 32; mins16 = m[0..7] as int16.
inline int32_t mins_dot(__m128i mins16, const int16_t bsums[16]) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums + 8));
  __m128i s = _mm_madd_epi16(_mm_hadd_epi16(lo, hi), mins16);
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// All 8 scales and mins at once with 32-bit masks (same values as unpack_scale_min_k4): bytes
// 0..3 hold sc[0..3] (+ top bits of sc[4..7]), 4..7 m[0..3] (+ top bits of m[4..7]), 8..11 the
// low nibbles of sc[4..7] | m[4..7] << 4. Returned as int16 lanes, built in registers (going
// through memory would split a store across a wider load and stall store forwarding).
inline void unpack_all_scale_min(const uint8_t* scales, __m128i* sc16, __m128i* m16) {
  uint64_t sc8, m8;
  unpack_scales_mins_k4(scales, &sc8, &m8);
  *sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8)));
  *m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
}

// Q4_K (kFifthBit = false) and Q5_K (true), one weight row against NT activation rows.
template <typename Block, bool kFifthBit, int NT>
void dot_min_scale(int64_t n, const uint8_t* w, const uint8_t* act, size_t stride, float* out) {
  const auto* x = reinterpret_cast<const Block*>(w);
  const BlockQ8_K* a[NT];
  for (int t = 0; t < NT; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(act + t * stride);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  __m256 acc[NT];
  float min_sum[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm256_setzero_ps();
    min_sum[t] = 0.0f;
  }
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    __m128i sc16, m16;
    unpack_all_scale_min(x[b].scales, &sc16, &m16);
    const float xd = half_to_float(x[b].d), xdmin = half_to_float(x[b].dmin);
    for (int t = 0; t < NT; ++t) min_sum[t] += (xdmin * a[t][b].d) * static_cast<float>(mins_dot(m16, a[t][b].bsums));
    // sc[0..7] as int16, in both 128-bit lanes; sub-block j's scale is broadcast by one shuffle.
    const __m256i scales16 = _mm256_broadcastsi128_si256(sc16);
    __m256i high_bits = _mm256_setzero_si256();
    if constexpr (kFifthBit) high_bits = load256(x[b].qh);
    __m256i sumi[NT];
    for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(x[b].qs + 32 * c);
      __m256i q_lo = _mm256_and_si256(q, low_mask);
      __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
      if constexpr (kFifthBit) {
        const __m256i one = _mm256_set1_epi8(1);
        const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * c), one);
        const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * c + 1), one);
        q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(h_lo, 4));
        q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(h_hi, 4));
      }
      const __m256i s_lo = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0404 * c)));
      const __m256i s_hi = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0302 + 0x0404 * c)));
      for (int t = 0; t < NT; ++t) {
        const __m256i p_lo = _mm256_maddubs_epi16(q_lo, load256(a[t][b].qs + 64 * c));
        const __m256i p_hi = _mm256_maddubs_epi16(q_hi, load256(a[t][b].qs + 64 * c + 32));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p_lo, s_lo));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p_hi, s_hi));
      }
    }
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(xd * a[t][b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum_ps(acc[t]) - min_sum[t];
}

// --- Q4_K register-blocked tiles -------------------------------------------------------------
//
// Same packing as the Q8_0 tiles, per super-block: the exact int32 sums sum_j sc[j] * (q . a)_j
// of 4 (row, token) pairs share one float vector (lane k: pair k's low 128-bit half, k + 4: its
// high half), and the exact min terms sum_j m[j] * bsum_j of the 4 pairs share one 128-bit
// vector. Per lane: acc = fma(d_w * d_a, float(int), acc), macc = fma(dmin_w * d_a,
// float(min_int), macc) over the super-blocks in order; y = (acc_low + acc_high) - macc. The same
// whichever 4 pairs share the vectors, so results are bit-identical for any token grouping.

// Lane k: sum of the 4 int32 lanes of p_k (exact).
inline __m128i pack4_sums128(__m128i p0, __m128i p1, __m128i p2, __m128i p3) {
  const __m128i a = _mm_add_epi32(_mm_unpacklo_epi32(p0, p1), _mm_unpackhi_epi32(p0, p1));
  const __m128i b = _mm_add_epi32(_mm_unpacklo_epi32(p2, p3), _mm_unpackhi_epi32(p2, p3));
  return _mm_add_epi32(_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b));
}

// Sums of the 8 pairs of 16-element bsums (the 32-element sub-block sums) as int16.
QS_HOT_INLINE __m128i bsums32(const BlockQ8_K& a) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums + 8));
  return _mm_hadd_epi16(lo, hi);
}

// One Q4_K super-block, decoded once, dotted with NT activation blocks: sumi[t] (8 int32 lanes,
// exact) and mins[t] (4 int32 lanes whose sum is the min term); bs[t] = bsums32(a[t][b]).
template <int NT>
inline void q4_k_block(const BlockQ4_K& x, const BlockQ8_K* const* a, int64_t b, const __m128i* bs,
                       __m256i* sumi, __m128i* mins) {
  __m128i sc16, m16;
  unpack_all_scale_min(x.scales, &sc16, &m16);
  for (int t = 0; t < NT; ++t) mins[t] = _mm_madd_epi16(bs[t], m16);
  const __m256i scales16 = _mm256_broadcastsi128_si256(sc16);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256(x.qs + 32 * c);
    const __m256i q_lo = _mm256_and_si256(q, low_mask);
    const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
    const __m256i s_lo = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0404 * c)));
    const __m256i s_hi = _mm256_shuffle_epi8(scales16, _mm256_set1_epi16(static_cast<int16_t>(0x0302 + 0x0404 * c)));
    for (int t = 0; t < NT; ++t) {
      const __m256i p_lo = _mm256_maddubs_epi16(q_lo, load256(a[t][b].qs + 64 * c));
      const __m256i p_hi = _mm256_maddubs_epi16(q_hi, load256(a[t][b].qs + 64 * c + 32));
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo), _mm256_madd_epi16(p_hi, s_hi)));
    }
  }
}

// Prefetches every cache line of [p, p + bytes) into L1.
inline void prefetch_span(const char* p, size_t bytes) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t line = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; line < end; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
  }
}

// Lane k: the full int32 total of pair k (sum of its two 128-bit halves, exact).
inline __m128i pack4_totals(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i v = pack4_halfsums(p0, p1, p2, p3);
  return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// Writes lane k of acc - macc to out[k * stride] for k < n.
inline void store_diff(__m128 acc, __m128 macc, int n, float* out, size_t stride) {
  alignas(16) float l[4];
  _mm_store_ps(l, _mm_sub_ps(acc, macc));
  for (int k = 0; k < n; ++k) out[k * stride] = l[k];
}

// One weight row x 4 tokens: the row's super-block is decoded once for 4 tokens. `next` is the
// matching row of the following 4-row group, prefetched linearly.
void q4_k_row_x4(int64_t nb, const BlockQ4_K* x, const BlockQ8_K* const* a, float* y, size_t y_stride,
                 int n_tok, const char* next) {
  __m128 acc = _mm_setzero_ps(), macc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_span(next + b * static_cast<int64_t>(sizeof(BlockQ4_K)), sizeof(BlockQ4_K));
    __m256i sumi[4];
    __m128i mins[4];
    const __m128i bs[4] = {bsums32(a[0][b]), bsums32(a[1][b]), bsums32(a[2][b]), bsums32(a[3][b])};
    q4_k_block<4>(x[b], a, b, bs, sumi, mins);
    const __m128 da = _mm_setr_ps(a[0][b].d, a[1][b].d, a[2][b].d, a[3][b].d);
    const __m128i v = pack4_totals(sumi[0], sumi[1], sumi[2], sumi[3]);
    const __m128i mv = pack4_sums128(mins[0], mins[1], mins[2], mins[3]);
    acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(half_to_float(x[b].d)), da), _mm_cvtepi32_ps(v), acc);
    macc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(half_to_float(x[b].dmin)), da), _mm_cvtepi32_ps(mv), macc);
  }
  store_diff(acc, macc, n_tok, y, y_stride);
}

// --- decode (4 rows x 1 token) helpers shared by Q4_K and Q6_K ---------------------------------
//
// Decode streams every weight byte once, so these kernels count vector uops per super-block (on
// the target, Zen 4 with AVX2 only, about 4 retire per cycle, at most 2 of them maddubs / madd /
// FMA): the 4 rows' f16 scales are gathered with scalar loads into one conversion instead of
// inserts, and the per-row reductions and float steps of the 4 rows (and Q4_K's min terms) share
// vectors. Tried and dropped: storing the (sc, sc) madd pairs once per block and broadcasting
// each sub-block's pair from memory instead of a byte shuffle (0.85x: a 32-bit load from inside a
// recent 256-bit store is not forwarded; still 0.9x with the store one block ahead), and vpermd
// instead of vpshufb for that broadcast (0.95x).

// Prefetches the 576 bytes (4 Q4_K blocks, 9 lines) or 840 bytes (4 Q6_K blocks, 14 lines) at p
// with fixed offsets: when p is not line aligned the last line is the first of the next call's
// span, so each line is still prefetched (at most one block step late) without a loop over lines.
// The prefetched span runs one 4-row group (4 rows' bytes) ahead. Two SMT threads share the 32 KB
// L1, so beyond kL1PrefetchDistance bytes ahead the lines go to L2 only: prefetched into L1 they
// were evicted before use (interleaved runs at 2 threads, 2560 x 9728: Q4_K and Q6_K 1.2-1.4x
// faster with T1; in = 4096, 9.2 / 13.4 KB ahead: 1.05-1.1x; at in = 2560, 5.8 / 8.4 KB ahead:
// Q4_K 0.9x, Q6_K 0.95x in the microbench, so T0 there).
constexpr int64_t kL1PrefetchDistance = 9000;

template <int kLines>
QS_HOT_INLINE void prefetch_lines(const char* p, bool to_l2) {
  if (to_l2) {
    for (int i = 0; i < kLines; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T1);
  } else {
    for (int i = 0; i < kLines; ++i) _mm_prefetch(p + 64 * i, _MM_HINT_T0);
  }
}

// Four 16-bit values (one per row) as one 64-bit scalar, built with scalar loads and shifts (on
// the integer ALUs, not the vector pipes).
inline uint64_t gather4_u16(const void* p0, const void* p1, const void* p2, const void* p3) {
  uint16_t v[4];
  std::memcpy(&v[0], p0, 2);
  std::memcpy(&v[1], p1, 2);
  std::memcpy(&v[2], p2, 2);
  std::memcpy(&v[3], p3, 2);
  return v[0] | uint64_t{v[1]} << 16 | uint64_t{v[2]} << 32 | uint64_t{v[3]} << 48;
}

// [s0.lo + s0.hi | s1.lo + s1.hi] (128-bit halves, exact int32).
QS_HOT_INLINE __m256i fold_halves2(__m256i s0, __m256i s1) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(s0, s1, 0x20), _mm256_permute2x128_si256(s0, s1, 0x31));
}

// 4 Q4_K rows x 1 token (decode and token tails), prefetching the next 4-row group linearly.
//
// Per row and super-block the exact int32 totals are T = sum_j sc[j] * (q . a)_j and
// M = sum_j m[j] * bsum32_j (as in q4_k_block). Bounds: a maddubs pair sum of 4-bit levels is
// <= 2 * 15 * 127 = 3810 (no saturation), times a 6-bit scale in madd <= 2 * 3810 * 63 per lane;
// the block total is < 256 * 15 * 127 * 63 < 2^31.
//
// Lane layout of the shared vector: [T0 T2 M0 M2 | T1 T3 M1 M3]; the f16 scales are shuffled into
// the same order [d0 d2 dmin0 dmin2 | d1 d3 dmin1 dmin3], so each lane does acc = fma(d_w * d_a,
// float(int), acc) over the blocks (what acc does for T and macc for M in q4_k_row_x4) and
// y_r = acc_r - macc_r: the same float operations per (row, token) as q4_k_row_x4 and the
// repacking GEMM. The unrolled row loop keeps the 4 sums in registers; each sub-block scale is
// one in-lane byte shuffle of sc[0..7] (int16, both 128-bit lanes).
void q4_k_x4_rows(int64_t nb, const BlockQ4_K* const* x, const BlockQ8_K* a, float* y, int n_rows,
                  const char* next) {
  static_assert(offsetof(BlockQ4_K, d) == 0 && offsetof(BlockQ4_K, dmin) == 2);
  // d (bytes 0, 1) and dmin (2, 3) of row r in 32-bit word r -> [d0 d2 dmin0 dmin2 d1 d3 dmin1 dmin3].
  const __m128i half_ctrl = _mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const bool to_l2 = 4 * nb * static_cast<int64_t>(sizeof(BlockQ4_K)) > kL1PrefetchDistance;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_lines<9>(next + b * 4 * static_cast<int64_t>(sizeof(BlockQ4_K)), to_l2);
    const BlockQ8_K& ab = a[b];
    __m256i sumi[4];
    __m128i m16[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const BlockQ4_K& xb = x[r][b];
      uint64_t sc8, m8;
      unpack_scales_mins_k4(xb.scales, &sc8, &m8);
      m16[r] = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
      const __m256i sw = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8))));
      __m256i s = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load256(xb.qs + 32 * c);
        const __m256i p_lo = _mm256_maddubs_epi16(_mm256_and_si256(q, low_mask), load256(ab.qs + 64 * c));
        const __m256i p_hi =
            _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask), load256(ab.qs + 64 * c + 32));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p_lo, _mm256_shuffle_epi8(sw, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0404 * c)))));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p_hi, _mm256_shuffle_epi8(sw, _mm256_set1_epi16(static_cast<int16_t>(0x0302 + 0x0404 * c)))));
      }
      sumi[r] = s;
    }
    const __m256i bs = _mm256_broadcastsi128_si256(bsums32(ab));
    const __m256i mins01 = _mm256_madd_epi16(bs, _mm256_set_m128i(m16[1], m16[0]));
    const __m256i mins23 = _mm256_madd_epi16(bs, _mm256_set_m128i(m16[3], m16[2]));
    const __m256i v = pack4_halfsums(fold_halves2(sumi[0], sumi[1]), fold_halves2(sumi[2], sumi[3]), mins01, mins23);
    uint32_t dd[4];
    for (int r = 0; r < 4; ++r) std::memcpy(&dd[r], &x[r][b].d, 4);  // d, dmin adjacent
    const __m128i halves = _mm_shuffle_epi8(
        _mm_set_epi64x(static_cast<long long>(dd[2] | uint64_t{dd[3]} << 32), static_cast<long long>(dd[0] | uint64_t{dd[1]} << 32)),
        half_ctrl);
    const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(halves), _mm256_set1_ps(ab.d));
    acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(v), acc);
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  const float out[4] = {l[0] - l[2], l[4] - l[6], l[1] - l[3], l[5] - l[7]};
  for (int r = 0; r < n_rows; ++r) y[r] = out[r];
}

// 4 Q4_K rows x NT tokens (NT = 2..4: verify steps and small batches below the repacking GEMM),
// each row's nibbles and sub-block scales unpacked once for the NT tokens. Per (row, token) the
// same exact int32 totals and the same float sequence as q4_k_x4_rows (so results are
// bit-identical to NT separate one-token calls, whatever the grouping). q4_k_x4_rows itself stays
// the one-token kernel: decode speed was tuned on it (see above), and a template over NT moved its
// register allocation.
template <int NT>
void q4_k_x4_rows_multi(int64_t nb, const BlockQ4_K* const* x, const BlockQ8_K* const* a, float* const* y,
                        int n_rows, const char* next) {
  static_assert(NT >= 2 && NT <= 4);
  const __m128i half_ctrl = _mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const bool to_l2 = 4 * nb * static_cast<int64_t>(sizeof(BlockQ4_K)) > kL1PrefetchDistance;
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_lines<9>(next + b * 4 * static_cast<int64_t>(sizeof(BlockQ4_K)), to_l2);
    __m256i sumi[4][NT];
    __m128i m16[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const BlockQ4_K& xb = x[r][b];
      uint64_t sc8, m8;
      unpack_scales_mins_k4(xb.scales, &sc8, &m8);
      m16[r] = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
      const __m256i sw = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc8))));
      __m256i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        const __m256i q = load256(xb.qs + 32 * c);
        const __m256i q_lo = _mm256_and_si256(q, low_mask);
        const __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
        const __m256i s_lo = _mm256_shuffle_epi8(sw, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0404 * c)));
        const __m256i s_hi = _mm256_shuffle_epi8(sw, _mm256_set1_epi16(static_cast<int16_t>(0x0302 + 0x0404 * c)));
        for (int t = 0; t < NT; ++t) {
          const __m256i p_lo = _mm256_maddubs_epi16(q_lo, load256(a[t][b].qs + 64 * c));
          const __m256i p_hi = _mm256_maddubs_epi16(q_hi, load256(a[t][b].qs + 64 * c + 32));
          // Same association as q4_k_x4_rows: (s + lo) + hi (integer sums, exact either way).
          s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p_lo, s_lo));
          s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p_hi, s_hi));
        }
      }
      for (int t = 0; t < NT; ++t) sumi[r][t] = s[t];
    }
    uint32_t dd[4];
    for (int r = 0; r < 4; ++r) std::memcpy(&dd[r], &x[r][b].d, 4);  // d, dmin adjacent
    const __m256 wscale = _mm256_cvtph_ps(_mm_shuffle_epi8(
        _mm_set_epi64x(static_cast<long long>(dd[2] | uint64_t{dd[3]} << 32), static_cast<long long>(dd[0] | uint64_t{dd[1]} << 32)),
        half_ctrl));
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& ab = a[t][b];
      const __m256i bs = _mm256_broadcastsi128_si256(bsums32(ab));
      const __m256i mins01 = _mm256_madd_epi16(bs, _mm256_set_m128i(m16[1], m16[0]));
      const __m256i mins23 = _mm256_madd_epi16(bs, _mm256_set_m128i(m16[3], m16[2]));
      const __m256i v = pack4_halfsums(fold_halves2(sumi[0][t], sumi[1][t]), fold_halves2(sumi[2][t], sumi[3][t]), mins01, mins23);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(wscale, _mm256_set1_ps(ab.d)), _mm256_cvtepi32_ps(v), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    alignas(32) float l[8];
    _mm256_store_ps(l, acc[t]);
    const float out[4] = {l[0] - l[2], l[4] - l[6], l[1] - l[3], l[5] - l[7]};
    for (int r = 0; r < n_rows; ++r) y[t][r] = out[r];
  }
}

// 1-4 tokens for a 4-row group: one pass over the group's blocks.
void q4_k_x4_rows_tail(int64_t nb, const BlockQ4_K* const* x, const uint8_t* act, size_t act_stride, int n_tok,
                       float* y, size_t y_stride, int n_rows, const char* next) {
  const BlockQ8_K* a[4];
  float* yt[4];
  for (int t = 0; t < n_tok; ++t) {
    a[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
    yt[t] = y + t * y_stride;
  }
  switch (n_tok) {
    case 1: q4_k_x4_rows(nb, x, a[0], yt[0], n_rows, next); break;
    case 2: q4_k_x4_rows_multi<2>(nb, x, a, yt, n_rows, next); break;
    case 3: q4_k_x4_rows_multi<3>(nb, x, a, yt, n_rows, next); break;
    case 4: q4_k_x4_rows_multi<4>(nb, x, a, yt, n_rows, next); break;
    default: break;
  }
}

// TileDotFn for the K-quants: rows in groups of 4 (their blocks stay in L1), tokens in groups of
// 4 through kRowX4 row by row (or, with kTailTakes4, through kTail for all 4 rows at once), the
// remaining 1-3 tokens through kTail (one call for all of them).
// Both compute, per (row, token) pair, acc = fma(d_w * d_a, float(exact super-block total), acc)
// over the super-blocks in order.
template <typename Block,
          void (*kRowX4)(int64_t, const Block*, const BlockQ8_K* const*, float*, size_t, int, const char*),
          void (*kTail)(int64_t, const Block* const*, const uint8_t*, size_t, int, float*, size_t, int, const char*),
          bool kTailTakes4>
void k_quant_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act, size_t act_stride,
                  int n_act, float* y, size_t y_stride) {
  const int64_t nb = n / kBlockK;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(act);
  for (int r0 = 0; r0 < n_rows; r0 += 4) {
    const int rows = n_rows - r0 < 4 ? n_rows - r0 : 4;
    const char* next = reinterpret_cast<const char*>(wb + (r0 + 4) * w_stride);
    const Block* x[4];
    for (int i = 0; i < 4; ++i) {
      x[i] = reinterpret_cast<const Block*>(wb + (r0 + (i < rows ? i : rows - 1)) * w_stride);
    }
    int t0 = 0;
    if constexpr (kTailTakes4) {
      for (; t0 + 4 <= n_act; t0 += 4) kTail(nb, x, ab + t0 * act_stride, act_stride, 4, y + t0 * y_stride + r0, y_stride, rows, next);
    }
    for (; t0 + 4 <= n_act; t0 += 4) {
      const BlockQ8_K* a[4];
      for (int i = 0; i < 4; ++i) a[i] = reinterpret_cast<const BlockQ8_K*>(ab + (t0 + i) * act_stride);
      for (int r = 0; r < rows; ++r) {
        kRowX4(nb, x[r], a, y + t0 * y_stride + r0 + r, y_stride, 4, next + r * w_stride);
      }
    }
    if (t0 < n_act) kTail(nb, x, ab + t0 * act_stride, act_stride, n_act - t0, y + t0 * y_stride + r0, y_stride, rows, next);
  }
}

void q4_k_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act, size_t act_stride,
               int n_act, float* y, size_t y_stride) {
  k_quant_tile<BlockQ4_K, q4_k_row_x4, q4_k_x4_rows_tail, true>(n, w, w_stride, n_rows, act, act_stride, n_act, y, y_stride);
}

void q4_k_row_dot(int64_t n, const void* w, const void* act, size_t stride, int n_act, float* out) {
  q4_k_tile(n, w, 0, 1, act, stride, n_act, out, 1);
}

// One Q6_K super-block, decoded once, dotted with NT activation blocks: sumi[t] holds 8 int32
// lanes whose sum is the exact total sum_k scales[k] * sum_{i in k} (q_i - 32) * a_i (the -32
// through the activation block sums).
template <int NT>
inline void q6_k_block(const BlockQ6_K& x, const BlockQ8_K* const* a, int64_t b, __m256i* sumi) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F), two_bits = _mm256_set1_epi8(3);
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales)));
  for (int t = 0; t < NT; ++t) {
    sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(a[t][b].bsums)), 5));
  }
  for (int h = 0; h < 2; ++h) {
    // Scales 8h .. 8h + 7 as int16 in both 128-bit lanes; q[g]'s low half (16 elements) takes
    // scale 8h + 2g, its high half 8h + 2g + 1 -- one byte shuffle each.
    const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
    const __m256i l0 = load256(x.ql + 64 * h), l1 = load256(x.ql + 64 * h + 32);
    const __m256i hb = load256(x.qh + 32 * h);
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_slli_epi16(_mm256_and_si256(hb, two_bits), 4)),
        _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), two_bits), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), two_bits), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), two_bits), 4)),
    };
    for (int g = 0; g < 4; ++g) {
      const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g + 1))),
                                            _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g))));
      const __m256i s = _mm256_shuffle_epi8(sc_h, pick);
      for (int t = 0; t < NT; ++t) {
        const __m256i p = _mm256_maddubs_epi16(q[g], load256(a[t][b].qs + 128 * h + 32 * g));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(p, s));
      }
    }
  }
}

// One Q6_K row x 4 tokens; `next` (the matching row of the next 4-row group) is prefetched.
void q6_k_row_x4(int64_t nb, const BlockQ6_K* x, const BlockQ8_K* const* a, float* y, size_t y_stride, int n_tok,
                 const char* next) {
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_span(next + b * static_cast<int64_t>(sizeof(BlockQ6_K)), sizeof(BlockQ6_K));
    __m256i sumi[4];
    q6_k_block<4>(x[b], a, b, sumi);
    const __m128 da = _mm_setr_ps(a[0][b].d, a[1][b].d, a[2][b].d, a[3][b].d);
    acc = _mm_fmadd_ps(_mm_mul_ps(_mm_set1_ps(half_to_float(x[b].d)), da),
                       _mm_cvtepi32_ps(pack4_totals(sumi[0], sumi[1], sumi[2], sumi[3])), acc);
  }
  store_diff(acc, _mm_setzero_ps(), n_tok, y, y_stride);
}

// 4 Q6_K rows x 1 token (decode), prefetching the next 4-row group linearly. Per row and
// super-block the same exact int32 total as q6_k_block, with fewer uops:
//  - the -32 offset as madd(32 * sc, -bsums): 32 * sc lies in [-4096, 4064] (int16), the negated
//    16-element sums are shared by the 4 rows, and each product is <= 4096 * 2032 (exact int32);
//  - the high 2 bits of each element are moved to bits 4..5 by one 16-bit shift (0, 2 or 4, left
//    or right) and a 0x30 mask: bits 4..5 of every byte then come from the same byte's bits
//    0..1, 2..3, 4..5 or 6..7, so nothing crosses a byte boundary;
//  - the 4 rows' f16 scales are gathered with scalar loads into one conversion.
// Levels are 0..63, so a maddubs pair sum is <= 2 * 63 * 127 = 16002 (no saturation). The float
// sequence per row is that of q6_k_row_x4: acc = fma(d_w * d_a, float(total), acc).
void q6_k_x4_rows(int64_t nb, const BlockQ6_K* const* x, const BlockQ8_K* a, float* y, int n_rows, const char* next) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F), high_bits = _mm256_set1_epi8(0x30);
  const bool to_l2 = 4 * nb * static_cast<int64_t>(sizeof(BlockQ6_K)) > kL1PrefetchDistance;
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_lines<14>(next + b * 4 * static_cast<int64_t>(sizeof(BlockQ6_K)), to_l2);
    const BlockQ8_K& ab = a[b];
    const __m256i neg_bsums = _mm256_sub_epi16(_mm256_setzero_si256(), load256(ab.bsums));
    __m256i sumi[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const BlockQ6_K& xb = x[r][b];
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.scales)));
      __m256i s = _mm256_madd_epi16(_mm256_slli_epi16(sc16, 5), neg_bsums);
      for (int h = 0; h < 2; ++h) {
        // Scales 8h .. 8h + 7 in both 128-bit lanes; q[g]'s low half takes scale 8h + 2g, its
        // high half 8h + 2g + 1.
        const __m256i sc_h = h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
        const __m256i l0 = load256(xb.ql + 64 * h), l1 = load256(xb.ql + 64 * h + 32);
        const __m256i hb = load256(xb.qh + 32 * h);
        const __m256i q[4] = {
            _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_and_si256(_mm256_slli_epi16(hb, 4), high_bits)),
            _mm256_or_si256(_mm256_and_si256(l1, low_mask), _mm256_and_si256(_mm256_slli_epi16(hb, 2), high_bits)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask), _mm256_and_si256(hb, high_bits)),
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                            _mm256_and_si256(_mm256_srli_epi16(hb, 2), high_bits)),
        };
        for (int g = 0; g < 4; ++g) {
          const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g + 1))),
                                                _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (2 * g))));
          const __m256i p = _mm256_maddubs_epi16(q[g], load256(ab.qs + 128 * h + 32 * g));
          s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc_h, pick)));
        }
      }
      sumi[r] = s;
    }
    const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(gather4_u16(&x[0][b].d, &x[1][b].d, &x[2][b].d, &x[3][b].d))));
    acc = _mm_fmadd_ps(_mm_mul_ps(d, _mm_set1_ps(ab.d)), _mm_cvtepi32_ps(pack4_totals(sumi[0], sumi[1], sumi[2], sumi[3])), acc);
  }
  store_diff(acc, _mm_setzero_ps(), n_rows, y, 1);
}

// Token tails for Q6_K: one token at a time (no multi-token Q6_K tail kernel yet).
void q6_k_x4_rows_tail(int64_t nb, const BlockQ6_K* const* x, const uint8_t* act, size_t act_stride, int n_tok,
                       float* y, size_t y_stride, int n_rows, const char* next) {
  for (int t = 0; t < n_tok; ++t) {
    q6_k_x4_rows(nb, x, reinterpret_cast<const BlockQ8_K*>(act + t * act_stride), y + t * y_stride, n_rows, next);
  }
}

void q6_k_tile(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act, size_t act_stride,
               int n_act, float* y, size_t y_stride) {
  k_quant_tile<BlockQ6_K, q6_k_row_x4, q6_k_x4_rows_tail, false>(n, w, w_stride, n_rows, act, act_stride, n_act, y, y_stride);
}

void q6_k_row_dot(int64_t n, const void* w, const void* act, size_t stride, int n_act, float* out) {
  q6_k_tile(n, w, 0, 1, act, stride, n_act, out, 1);
}

// --- activation quantization (bit-identical to quantize_row_q8_0a / quantize_row_q8_k) -------

inline float block_amax(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 values -> 32 int8 of round(x * id).
inline void quantize32(const float* x, float id, int8_t* out) {
  const __m256 scale = _mm256_set1_ps(id);
  __m256i v[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), scale),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v[k] = _mm256_cvtps_epi32(r);
  }
  const __m256i p01 = _mm256_packs_epi32(v[0], v[1]);
  const __m256i p23 = _mm256_packs_epi32(v[2], v[3]);
  const __m256i p = _mm256_packs_epi16(p01, p23);
  const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), ordered);
}

void quantize_q8_0a(const float* x, BlockQ8_0A* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    const float amax = block_amax(x + 32 * b, 32);
    dst[b].d = amax / 127.0f;
    quantize32(x + 32 * b, amax > 0.0f ? 127.0f / amax : 0.0f, dst[b].qs);
  }
}

void quantize_q8_k(const float* x, BlockQ8_K* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    const float* xb = x + 256 * b;
    const float amax = block_amax(xb, 256);
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    dst[b].d = amax / 127.0f;
    for (int k = 0; k < 8; ++k) quantize32(xb + 32 * k, id, dst[b].qs + 32 * k);
    for (int k = 0; k < 16; ++k) {
      const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dst[b].qs + 16 * k)));
      dst[b].bsums[k] = static_cast<int16_t>(hsum_epi32(_mm256_madd_epi16(v, _mm256_set1_epi16(1))));
    }
  }
}

using MultiFn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, float*);

// Tokens in groups of 4, then the remainder, through the NT-token kernels.
template <MultiFn k1, MultiFn k2, MultiFn k3, MultiFn k4>
void row_dot_multi(int64_t n, const void* w, const void* act, size_t stride, int n_act, float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(act);
  int t = 0;
  for (; t + 4 <= n_act; t += 4) k4(n, wb, ab + t * stride, stride, out + t);
  switch (n_act - t) {
    case 3: k3(n, wb, ab + t * stride, stride, out + t); break;
    case 2: k2(n, wb, ab + t * stride, stride, out + t); break;
    case 1: k1(n, wb, ab + t * stride, stride, out + t); break;
    default: break;
  }
}

#define QS_MULTI(kernel, ...) \
  row_dot_multi<kernel<__VA_ARGS__, 1>, kernel<__VA_ARGS__, 2>, kernel<__VA_ARGS__, 3>, kernel<__VA_ARGS__, 4>>

}  // namespace

const DotKernels* QS_AVX2_DOT_TABLE() {
  static const DotKernels table = {
      CpuIsa::kAvx2,
      QS_MULTI(dot_float, 4, load8_f32, scalar_f32),
      QS_MULTI(dot_float, 2, load8_f16, scalar_f16),
      QS_MULTI(dot_float, 2, load8_bf16, scalar_bf16),
      q8_0_row_dot,
      QS_MULTI(dot_block32, BlockQ4_0, load_q4_0),
      q4_k_row_dot,
      QS_MULTI(dot_min_scale, BlockQ5_K, true),
      q6_k_row_dot,
      quantize_q8_0a,
      quantize_q8_k,
      q8_0_tile,
      q4_k_tile,
      q6_k_tile,
      QS_AVX2_GEMM(q4_k)(),
      QS_AVX2_GEMM(q6_k)(),
      QS_AVX2_GEMM(q8_0)(),
  };
  return &table;
}

}  // namespace qs::kernels

#else
namespace qs::kernels {
const DotKernels* QS_AVX2_DOT_TABLE() { return nullptr; }
}  // namespace qs::kernels
#endif
