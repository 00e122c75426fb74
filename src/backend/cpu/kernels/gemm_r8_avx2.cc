// Batch GEMM for Q4_K, Q6_K and Q8_0 weights through 8-row interleaved repacking (AVX2 + FMA + F16C).
//
// Why: in the row-major file layout one 32-byte weight vector holds 64 elements of ONE row, so a
// maddubs over it already spans a whole 32-element sub-block and its int16 pair sums must be
// widened (madd with the sub-block scale) right away: 2 multiply-port uops per 32 products. Here 8
// rows are interleaved 4 bytes at a time, so one vector holds 4 consecutive elements of each of 8
// rows; a token's 4 activation bytes are broadcast against it and the int16 pair sums of the same
// (row, sub-block) land in the same lanes for 8 consecutive vectors. They are summed in int16
// (exact: a 4-bit weight times an int8 activation pair is <= 2 * 15 * 127 = 3810, 8 of them
// <= 30480 < 2^15; a 6-bit one <= 16002, 2 of them) and widened once per sub-block: ~1.1
// multiply-port uops per 32 products for Q4_K. The same layout idea is used by ik_llama.cpp's
// "_R8" types; this is our own code, repacking on the fly into per-thread scratch so the model file
// stays mmapped in its standard layout (decode keeps the row-major GEMV, which is bandwidth-bound).
//
// Cost model (measured with synthetic loops on the AMD EPYC dev machine, Zen 4 with AVX2 only):
// about 4 vector uops retire per cycle in total, and at most ~2 of them on the two pipes that run
// maddubs, madd, sign and FMA; 32-bit broadcasts from memory use the load ports only. So the
// kernels minimise the vector uops per product first (Q4_K: broadcast, maddubs, add per 32;
// Q8_0: broadcast, xor, maddubs, madd, add per 32) and keep the inner steps unrolled without
// scalar index arithmetic or register copies.
//
// Bit-identity: per (row, token, super-block) the kernels form the same exact int32 totals as the
// row-major kernels of dot_avx2.cc and then the same float sequence (acc = fma(d_w * d_a,
// float(total), acc) over super-blocks in order, y = acc - macc for Q4_K), so matmul may use either
// path for any token and results do not depend on batching.
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/gemm_r8_common.h"

// The names of the entry points this file defines: avx2_<type>_group_gemm, or
// avx2_evex_<type>_group_gemm when gemm_r8_evex_avx512_vnni.cc compiles this file again with the
// AVX-512 level's flags.
#ifndef QS_R8_GEMM
#define QS_R8_GEMM(type) avx2_##type##_group_gemm
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

namespace qs::kernels {
namespace {

using namespace r8;  // NOLINT(google-build-using-namespace): the shared helpers of gemm_r8_common.h


// --- Q4_K -------------------------------------------------------------------------------------

// One super-block of 8 rows, regrouped so that both nibbles of a byte belong to the same 32-element
// sub-block: qs[j][v] lane r holds 4 bytes of row r whose low nibbles are elements 4v..4v+3 of
// sub-block j and whose high nibbles are elements 16 + 4v .. 16 + 4v + 3. So a sub-block is 4
// vectors and all 8 of their nibble halves sum into one int16 accumulator per token.
struct alignas(32) Q4KR8 {
  uint8_t qs[8][4][32];
  int16_t scales[8][16];  // [j][2r], [j][2r + 1] = sc[j] of row r (madd pairs)
  int16_t mins[4][16];    // [k][2r + i] = m[2k + i] of row r
  float d[8], dmin[8];
};
static_assert(sizeof(Q4KR8) == 1472);

void repack_q4_k_r8(int64_t nb, const uint8_t* w, size_t w_stride, int n_rows, Q4KR8* out) {
  const __m128i low = _mm_set1_epi8(0x0F), high = _mm_set1_epi8(static_cast<char>(0xF0));
  for (int64_t b = 0; b < nb; ++b) {
    Q4KR8& o = out[b];
    // Scales and mins of the 8 rows, transposed in registers: row r's (sc[j], sc[j]) int16 pairs
    // as 32-bit lane j, then lane r of vector j after the transpose; likewise the min pairs.
    __m256i sc[8], mn[8];
    for (int r = 0; r < 8; ++r) {
      const auto& x = reinterpret_cast<const BlockQ4_K*>(group_row(w, w_stride, n_rows, r))[b];
      uint64_t sc8, m8;
      unpack_scales_mins_k4(x.scales, &sc8, &m8);
      const __m256i sc32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc8)));
      sc[r] = _mm256_or_si256(sc32, _mm256_slli_epi32(sc32, 16));
      mn[r] = _mm256_set_m128i(_mm_setzero_si128(), _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8))));
      o.d[r] = _cvtsh_ss(x.d);
      o.dmin[r] = _cvtsh_ss(x.dmin);
    }
    transpose8x8_epi32(sc);
    transpose8x8_epi32(mn);
    for (int j = 0; j < 8; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(o.scales[j]), sc[j]);
    for (int k = 0; k < 4; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(o.mins[k]), mn[k]);
    for (int c = 0; c < 4; ++c) {  // file bytes 32c + l: low nibble sub-block 2c, high 2c + 1
      __m256i m[8];
      for (int r = 0; r < 8; ++r) {
        const uint8_t* q = reinterpret_cast<const BlockQ4_K*>(group_row(w, w_stride, n_rows, r))[b].qs + 32 * c;
        const __m128i first = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));        // elements 0..15
        const __m128i second = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16));  // 16..31
        const __m128i even = _mm_or_si128(_mm_and_si128(first, low), _mm_slli_epi16(_mm_and_si128(second, low), 4));
        const __m128i odd = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(first, 4), low), _mm_and_si128(second, high));
        m[r] = _mm256_set_m128i(odd, even);
      }
      transpose8x8_epi32(m);  // m[v] (v < 4): sub-block 2c, m[4 + v]: sub-block 2c + 1
      for (int v = 0; v < 8; ++v) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.qs[2 * c + v / 4][v % 4]), m[v]);
      }
    }
  }
}

// sum_k madd(pairs[k], word k of each 128-bit lane of b), k < 4: with pairs[k] lane r holding
// row r's int16 pair (p_2k, p_2k+1) and b's 32-bit word k the activation pair (b_2k, b_2k+1),
// lane r is sum_{i < 8} p_i * b_i (exact int32).
inline __m256i madd_pairs4(const int16_t pairs[4][16], __m256i b) {
  __m256i s = _mm256_madd_epi16(load256(pairs[0]), _mm256_shuffle_epi32(b, 0x00));
  s = _mm256_add_epi32(s, _mm256_madd_epi16(load256(pairs[1]), _mm256_shuffle_epi32(b, 0x55)));
  s = _mm256_add_epi32(s, _mm256_madd_epi16(load256(pairs[2]), _mm256_shuffle_epi32(b, 0xAA)));
  return _mm256_add_epi32(s, _mm256_madd_epi16(load256(pairs[3]), _mm256_shuffle_epi32(b, 0xFF)));
}

// Lane r: sum_j m[r][j] * bsum32_j of the activation block (exact int32).
inline __m256i min_products(const int16_t mins[4][16], const BlockQ8_K& a) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums));
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.bsums + 8));
  return madd_pairs4(mins, _mm256_broadcastsi128_si256(_mm_hadd_epi16(lo, hi)));  // 32-element sums
}

// NT tokens (1..5) against one repacked 8-row group: per 64 products of a token a broadcast pair,
// two maddubs and two int16 adds; the nibble split of a weight vector (load, and, shift, and) is
// shared by the NT tokens. NT = 5 keeps the 2 NT int accumulators, both nibble vectors and the
// mask within the 16 ymm registers (the float accumulators live on the stack between blocks).
// The 4 vector steps of a sub-block are unrolled with pin() on the sums: left to itself GCC either
// keeps a loop (scalar index arithmetic and register copies per step) or, unrolled, re-associates
// the int16 sums into a tree through the stack.
template <int NT>
void q4_k_r8_tokens(int64_t nb, const Q4KR8* w, const BlockQ8_K* const* a, float* y, size_t y_stride,
                    int n_rows) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  __m256 acc[NT], macc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = macc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KR8& x = w[b];
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      __m256i s16[NT];
      for (int t = 0; t < NT; ++t) s16[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        __m256i p = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.qs[j][v]));
        pin(p);
        __m256i lo = _mm256_and_si256(p, low_mask);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), low_mask);
        pin(lo);
        pin(hi);
        for (int t = 0; t < NT; ++t) {
          const int8_t* q = a[t][b].qs + 32 * j + 4 * v;
          s16[t] = _mm256_add_epi16(s16[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast32(q)),
                                                             _mm256_maddubs_epi16(hi, bcast32(q + 16))));
          pin(s16[t]);
        }
      }
      const __m256i sc = load256(x.scales[j]);
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
    }
    const __m256 d = _mm256_load_ps(x.d), dmin = _mm256_load_ps(x.dmin);
    for (int t = 0; t < NT; ++t) {
      const __m256 da = _mm256_set1_ps(a[t][b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      macc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(min_products(x.mins, a[t][b])), macc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) store_rows(_mm256_sub_ps(acc[t], macc[t]), n_rows, y + t * y_stride);
}

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
// The same product with vpdpbusd, compiled only when gemm_r8_evex_avx512_vnni.cc builds this file
// with the AVX-512 VNNI flags (the avx512_vnni level's Q4_K GEMM). The 4-bit levels are unsigned
// and the activations signed, as vpdpbusd wants: per 64 products of a token a broadcast pair and
// two vpdpbusd into one int32 sum per (row, sub-block), instead of two maddubs and two int16 adds;
// the sub-block scale is then one vpmulld (the int32 sum can exceed int16, so no madd). Per
// super-block the int32 total equals q4_k_r8_tokens' exactly (integer sums), and the float steps are
// the same, so results are bit-identical to it and to the row-major kernels.
template <int NT>
void q4_k_r8_tokens_vnni(int64_t nb, const Q4KR8* w, const BlockQ8_K* const* a, float* y, size_t y_stride,
                         int n_rows) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F), low16 = _mm256_set1_epi32(0xFFFF);
  __m256 acc[NT], macc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = macc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q4KR8& x = w[b];
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      __m256i s32[NT];
      for (int t = 0; t < NT; ++t) s32[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        __m256i p = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.qs[j][v]));
        __m256i lo = _mm256_and_si256(p, low_mask);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), low_mask);
        pin(lo);
        pin(hi);
        for (int t = 0; t < NT; ++t) {
          const int8_t* q = a[t][b].qs + 32 * j + 4 * v;
          s32[t] = _mm256_dpbusd_epi32(s32[t], lo, bcast32(q));
          s32[t] = _mm256_dpbusd_epi32(s32[t], hi, bcast32(q + 16));
          pin(s32[t]);
        }
      }
      const __m256i sc = _mm256_and_si256(load256(x.scales[j]), low16);  // lane r: sc[j] of row r
      for (int t = 0; t < NT; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(s32[t], sc));
    }
    const __m256 d = _mm256_load_ps(x.d), dmin = _mm256_load_ps(x.dmin);
    for (int t = 0; t < NT; ++t) {
      const __m256 da = _mm256_set1_ps(a[t][b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(isum[t]), acc[t]);
      macc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(min_products(x.mins, a[t][b])), macc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) store_rows(_mm256_sub_ps(acc[t], macc[t]), n_rows, y + t * y_stride);
}
#endif

// --- Q6_K -------------------------------------------------------------------------------------

// One super-block of 8 rows with the 6-bit quants decoded to bytes (0..63): qs[g][v] lane r holds
// elements 32g + 4v .. 32g + 4v + 3 of row r. Sub-block k (16 elements) is g = k / 2,
// v = 4 (k % 2) .. 4 (k % 2) + 3.
struct alignas(32) Q6KR8 {
  uint8_t qs[8][8][32];
  int16_t scales[16][16];      // [k][2r], [k][2r + 1] = scales[k] of row r (madd pairs)
  int16_t offset_pairs[8][16];  // [p][2r + i] = -32 * scales[2p + i] of row r (the -32 offset)
  float d[8];
};
static_assert(sizeof(Q6KR8) == 2848);

// The 256 levels (0..63) of one Q6_K block as 8 vectors of 32 bytes in element order (see
// BlockQ6_K). The high 2 bits go to bits 4..5 with one 16-bit shift (by 4, 2, 0 or -2) and a 0x30
// mask: bits 4..5 of each byte then come from bits 0..1, 2..3, 4..5 or 6..7 of the same byte.
inline void decode_q6_k(const BlockQ6_K& x, __m256i q[8]) {
  const __m256i low_mask = _mm256_set1_epi8(0x0F), high_bits = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = load256(x.ql + 64 * h), l1 = load256(x.ql + 64 * h + 32);
    const __m256i hb = load256(x.qh + 32 * h);
    q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_and_si256(_mm256_slli_epi16(hb, 4), high_bits));
    q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low_mask), _mm256_and_si256(_mm256_slli_epi16(hb, 2), high_bits));
    q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask), _mm256_and_si256(hb, high_bits));
    q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2), high_bits));
  }
}

void repack_q6_k_r8(int64_t nb, const uint8_t* w, size_t w_stride, int n_rows, Q6KR8* out) {
  for (int64_t b = 0; b < nb; ++b) {
    Q6KR8& o = out[b];
    __m256i q[8][8];  // [row][g]
    // Scales transposed in registers (see repack_q4_k_r8): (sc[k], sc[k]) pairs for k < 8 and
    // k >= 8, and (sc[2p], sc[2p + 1]) pairs.
    __m256i lo[8], hi[8], pairs[8];
    for (int r = 0; r < 8; ++r) {
      const auto& x = reinterpret_cast<const BlockQ6_K*>(group_row(w, w_stride, n_rows, r))[b];
      decode_q6_k(x, q[r]);
      const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales));
      const __m256i s_lo = _mm256_cvtepi8_epi32(s8), s_hi = _mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8));
      const __m256i mask16 = _mm256_set1_epi32(0xFFFF);
      lo[r] = _mm256_or_si256(_mm256_and_si256(s_lo, mask16), _mm256_slli_epi32(s_lo, 16));
      hi[r] = _mm256_or_si256(_mm256_and_si256(s_hi, mask16), _mm256_slli_epi32(s_hi, 16));
      pairs[r] = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(s8), _mm256_set1_epi16(-32));  // |.| <= 4096
      o.d[r] = _cvtsh_ss(x.d);
    }
    transpose8x8_epi32(lo);
    transpose8x8_epi32(hi);
    transpose8x8_epi32(pairs);
    for (int k = 0; k < 8; ++k) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.scales[k]), lo[k]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.scales[8 + k]), hi[k]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.offset_pairs[k]), pairs[k]);
    }
    for (int g = 0; g < 8; ++g) {
      __m256i m[8];
      for (int r = 0; r < 8; ++r) m[r] = q[r][g];
      transpose8x8_epi32(m);
      for (int v = 0; v < 8; ++v) _mm256_store_si256(reinterpret_cast<__m256i*>(o.qs[g][v]), m[v]);
    }
  }
}

// Lane r: -32 * sum_k scales[r][k] * bsums[k], the -32 of every quant through the activation
// sums: one madd per pair of sub-blocks with the pair's bsums broadcast from memory. Exact int32:
// |-32 * sc| <= 4096 and |bsum| <= 16 * 128, so each product is < 2^23 and the 16 of a row < 2^27.
inline __m256i offset_products(const int16_t pairs[8][16], const BlockQ8_K& a) {
  const int8_t* bs = reinterpret_cast<const int8_t*>(a.bsums);
  __m256i s = _mm256_madd_epi16(load256(pairs[0]), bcast32(bs));
  for (int p = 1; p < 8; ++p) s = _mm256_add_epi32(s, _mm256_madd_epi16(load256(pairs[p]), bcast32(bs + 4 * p)));
  return s;
}

// NT tokens (1..4) against one repacked group. Per sub-block its 4 weight vectors and scale pairs
// are pinned in registers (left alone GCC recomputed vector addresses from k with scalar shifts
// per step); per token and sub-block: 4 broadcasts, 4 maddubs, 2 int16 adds (a maddubs pair sum of
// levels 0..63 is <= 2 * 63 * 127 = 16002, so two of them fit int16, four would not), 2 madd,
// 2 int32 adds. The -32 offset is one madd per pair of sub-blocks and token (offset_products),
// not per vector. Tried and slower (1 thread, 64 tokens, 0.9-0.97x): storing |q - 32| and its sign
// mask as the Q8_0 path does (the sign XOR per token and vector costs more than the madd and
// offset it saves, even though 4 pair sums of |w| <= 32 would fit int16); 3, 5 or 6 tokens.
template <int NT>
void q6_k_r8_tokens(int64_t nb, const Q6KR8* w, const BlockQ8_K* const* a, float* y, size_t y_stride,
                    int n_rows) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q6KR8& x = w[b];
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = offset_products(x.offset_pairs, a[t][b]);
    for (int k = 0; k < 16; ++k) {  // sub-blocks of 16: 4 vectors, int16 sums of 2
      // Sub-block k's 4 vectors are qs[k / 2][4 * (k % 2) + 0..3] (indexed, not offset from
      // qs[0][0]: pointer arithmetic past one 32-byte row is undefined, UBSan's bounds check).
      const uint8_t(*qk)[32] = &x.qs[k / 2][4 * (k % 2)];
      __m256i q0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qk[0]));
      __m256i q1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qk[1]));
      __m256i q2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qk[2]));
      __m256i q3 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qk[3]));
      __m256i sc = load256(x.scales[k]);
      pin(q0);
      pin(q1);
      pin(q2);
      pin(q3);
      pin(sc);
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t][b].qs + 16 * k;
        const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(q0, bcast32(q)), _mm256_maddubs_epi16(q1, bcast32(q + 4)));
        const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(q2, bcast32(q + 8)), _mm256_maddubs_epi16(q3, bcast32(q + 12)));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s01, sc));
        pin(isum[t]);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s23, sc));
        pin(isum[t]);
      }
    }
    const __m256 d = _mm256_load_ps(x.d);
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(a[t][b].d)), _mm256_cvtepi32_ps(isum[t]), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) store_rows(acc[t], n_rows, y + t * y_stride);
}

// --- Q8_0 -------------------------------------------------------------------------------------
//
// Signed int8 x signed int8 without vpsignb. maddubs needs one unsigned operand; the row-major
// kernels use w * a = |w| * sign(a, w), which costs a multiply-pipe uop per 32 products on top of
// maddubs and madd (on AMD Zen 4 sign, maddubs, madd and FMA share two pipes, and the old kernel
// of this file was bound by them: ~27 of those uops per 256 products). Here the sign is applied
// with a XOR against the weight's sign mask m (0 or -1; one uop on any of the four vector ALUs):
// for w < 0, a ^ m = ~a = -a - 1, so |w| * (a ^ m) = w * a - |w|, and
//   sum_i w_i * a_i = sum_i |w_i| * (a_i ^ m_i) + C,   C = sum of |w_i| over the w_i < 0,
// where C depends on the weights only: the repack computes it per (row, half block) and the
// kernel starts the half's int32 sum from it. Exact: for w >= 0, |w| <= 127 and a ^ m = a; for
// w < 0, |w| <= 128 and a ^ m = ~a; with a in -128..127 either way every product lies in
// [-16384, 16256], so a maddubs pair sum lies in [-32768, 32512] and never saturates. Two pair
// sums can exceed int16, so each maddubs result is widened at once (madd with ones). Per 32
// products: broadcast, xor, maddubs, madd, add.
//
// The int32 sums are the exact sums of the block's low (elements 0..15) and high halves, as in
// the row-major Q8_0 tiles of dot_avx2.cc, and the float sequence is theirs (acc_half =
// fma(d_w * d_a, float(sum_half), acc_half) over blocks in order, y = acc_lo + acc_hi), so both
// paths give bit-identical results.

// One 32-element block of 8 rows: absq[v] / mask[v] lane r hold |w| / the sign masks of elements
// 4v .. 4v + 3 of row r (v < 4: the low half); corr[h][r] is C of half h of row r.
struct alignas(32) Q80R8 {
  uint8_t absq[8][32];
  int8_t mask[8][32];
  int32_t corr[2][8];
  float d[8];
};
static_assert(sizeof(Q80R8) == 608);

void repack_q8_0_r8(int64_t nb, const uint8_t* w, size_t w_stride, int n_rows, Q80R8* out) {
  const __m256i zero = _mm256_setzero_si256(), ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    Q80R8& o = out[b];
    __m256i q[8];
    for (int r = 0; r < 8; ++r) {
      const auto& x = reinterpret_cast<const BlockQ8_0*>(group_row(w, w_stride, n_rows, r))[b];
      q[r] = load256(x.qs);
      o.d[r] = _cvtsh_ss(x.d);
    }
    transpose8x8_epi32(q);  // q[v] lane r: elements 4v .. 4v + 3 of row r
    for (int h = 0; h < 2; ++h) {
      // Lane r: |w| of row r's negative weights, summed per byte pair (maddubs with ones, <= 256)
      // and over the half's 4 vectors in int16 (<= 1024), then both int16 halves (<= 2048).
      __m256i neg16 = zero;
      for (int v = 4 * h; v < 4 * h + 4; ++v) {
        const __m256i ab = _mm256_abs_epi8(q[v]);  // -128 -> 0x80 = 128 as unsigned
        const __m256i mk = _mm256_cmpgt_epi8(zero, q[v]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.absq[v]), ab);
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.mask[v]), mk);
        neg16 = _mm256_add_epi16(neg16, _mm256_maddubs_epi16(_mm256_and_si256(ab, mk), ones8));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.corr[h]), _mm256_madd_epi16(neg16, ones16));
    }
  }
}

// NT tokens (1..8) against one repacked group. The two halves of a block run one after the other,
// so only NT int32 accumulators are live (NT = 8: 8 + |w| + mask + ones + temporaries <= 16 ymm).
template <int NT>
void q8_0_r8_tokens(int64_t nb, const Q80R8* w, const BlockQ8_0A* const* a, float* y, size_t y_stride, int n_rows) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2][NT];
  for (int t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Q80R8& x = w[b];
    const __m256 d = _mm256_load_ps(x.d);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.corr[h]));
      __m256i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = c;
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int v = 4 * h + i;
        __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.absq[v]));
        __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(x.mask[v]));
        pin(q);
        pin(m);
        for (int t = 0; t < NT; ++t) {
          const __m256i p = _mm256_maddubs_epi16(q, _mm256_xor_si256(bcast32(a[t][b].qs + 4 * v), m));
          s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(p, ones));
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

// --- GroupGemmFn entry points -----------------------------------------------------------------

struct Q4KKernels {
  template <int NT>
  static void run(int64_t nb, const Q4KR8* w, const BlockQ8_K* const* a, float* y, size_t y_stride, int n_rows) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    q4_k_r8_tokens_vnni<NT>(nb, w, a, y, y_stride, n_rows);
#else
    q4_k_r8_tokens<NT>(nb, w, a, y, y_stride, n_rows);
#endif
  }
};
struct Q6KKernels {
  template <int NT>
  static void run(int64_t nb, const Q6KR8* w, const BlockQ8_K* const* a, float* y, size_t y_stride, int n_rows) {
    q6_k_r8_tokens<NT>(nb, w, a, y, y_stride, n_rows);
  }
};
struct Q80Kernels {
  template <int NT>
  static void run(int64_t nb, const Q80R8* w, const BlockQ8_0A* const* a, float* y, size_t y_stride, int n_rows) {
    q8_0_r8_tokens<NT>(nb, w, a, y, y_stride, n_rows);
  }
};

// Crossovers against the row-major tiles (microbench Gemm/<type>/tokens:N/threads:2, 2560 x
// 2560, interleaved runs of both builds): repacking an 8-row group costs about one token's
// row-major dot for Q4_K and several for Q6_K (6-bit decode plus three transposes), so small
// batches stay row-major. Q4_K: equal at 2-4 tokens, repacked 1.2-1.3x faster at 8; Q8_0: equal
// at 4, faster from 8; Q6_K: slower up to 8, 1.15-1.2x faster at 16. After the XOR-sign Q8_0
// kernel and the unrolled Q4_K steps (threads:1): Q8_0 at 4 tokens is still 1.13x faster
// row-major; Q4_K at 2 tokens is 1.1x faster repacked in this L3-resident benchmark, but batched
// decode streams its weights from DRAM, where the row-major tiles' prefetch matters, so the
// threshold stays at 4 until it is measured there. Q6_K after the cheaper repack (6-bit decode
// with one shift + mask per vector) and kernel: 1.3x faster than row-major at 8 tokens and 1.1x
// at 6, 0.93x at 4 (1 thread, 2560 x 2560, in-process, best of 15); the 2-thread microbench at 8
// tokens gave ~1.1x on a loaded machine, so the threshold is 8 (not yet measured with the weights
// streamed from DRAM in batched decode).
// Q4_K since the 4 x 4 row-major kernel (q4_k_x4_rows_multi<4>, nibbles unpacked once per 4
// tokens): at 4 tokens it is 1.1-1.15x faster than repacking (threads:1, 0.43 vs 0.47-0.50 ms, two
// interleaved rounds), and in a 4B-shaped verify step the repack was twice the time of its GEMM
// (perf: repack_q4_k_r8 16.5%, q4_k_r8_tokens<4> 8.0% of the samples); from 5 tokens the GEMM wins.
constexpr int kQ4KMinTokens = 5;
constexpr int kQ80MinTokens = 8;
constexpr int kQ6KMinTokens = 8;

}  // namespace

GroupGemm QS_R8_GEMM(q4_k)() {
  return {group_gemm<Q4KR8, BlockQ8_K, kBlockK, 5, repack_q4_k_r8, Q4KKernels>,
          sizeof(Q4KR8), kQ4KMinTokens};
}

GroupGemm QS_R8_GEMM(q8_0)() {
  return {group_gemm<Q80R8, BlockQ8_0A, kBlockQ8_0, 8, repack_q8_0_r8, Q80Kernels>,
          sizeof(Q80R8) * (kBlockK / kBlockQ8_0), kQ80MinTokens};
}

GroupGemm QS_R8_GEMM(q6_k)() {
  return {group_gemm<Q6KR8, BlockQ8_K, kBlockK, 4, repack_q6_k_r8, Q6KKernels>,
          sizeof(Q6KR8), kQ6KMinTokens};
}

}  // namespace qs::kernels

#else
namespace qs::kernels {
GroupGemm QS_R8_GEMM(q4_k)() { return {}; }
GroupGemm QS_R8_GEMM(q8_0)() { return {}; }
GroupGemm QS_R8_GEMM(q6_k)() { return {}; }
}  // namespace qs::kernels
#endif
