// Matmul kernels on 16-row packed weights (packed_rows.h) with AVX-512 VNNI: Q4_K, Q6_K, Q8_0, for
// any number of tokens (decode, verify steps and prefill all come here; matmul_with loops over
// 16-row groups, packed_gemm over chunks of up to 12 tokens).
//
// Per 64-byte weight vector (4 consecutive elements of each of the 16 rows) and token: one
// vpdpbusd with the token's 4 activation bytes broadcast from memory, adding 64 products into the
// 16 per-row int32 sums. The unpacking of a vector (nibble split, Q6_K's top bits) is shared by the
// tokens of the call. Per sub-block the int32 sums are multiplied by the 16 rows' scales (vpmulld:
// a Q4_K sub-block sum can exceed int16, so no madd) and added into the super-block total.
//
// Exactness and bit-identity: per (row, token, block) these are exact int32 totals; for Q4_K and
// Q6_K the same totals as the row-major kernels of dot_avx2.cc (the same integers summed in another
// order) and the same float sequence:
//   Q4_K: acc = fma(d * d_a, float(total), acc), macc = fma(dmin * d_a, float(sum_j m_j bsum32_j),
//         macc) over super-blocks in order, y = acc - macc;
//   Q6_K: acc = fma(d * d_a, float(total), acc) with total = sum_k sc_k (sum q a - 32 bsum_k);
//   Q8_0: acc = fma(d * d_a, float(block sum), acc) over the 32-element blocks in order. The
//         row-major kernels keep two accumulators, one per 16-element half; one per block saves a
//         third of the float work per (token, block), the bound of Q8_0 prefill (pp512 1.11x on a
//         Zen 5 VM, session 22), and frees the registers for 12 tokens per pass instead of 8.
// So a packed Q4_K / Q6_K matmul returns bit for bit what the row-major AVX2 / AVX-512 kernels
// return, and every packed matmul returns the same bits for any number of tokens and any chunking
// (tests/backend/cpu/packed_rows_test.cc; Q8_0 also against float64 of its quantized operands).
//
// The offsets are folded into the accumulator start from per-token terms prepared once per call
// (prepare_packed_activations): Q6_K's -32 * bsum_k per sub-block, Q8_0's -128 * sum(a) per
// block (the weights are stored as q + 128); Q4_K's 32-element activation sums, paired for
// vpdpwssd against the 6-bit mins.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/packed_rows.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace qs::kernels {
namespace {

inline __m512i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }  // Q6_K and Q8_0 blocks are not 64-byte multiples
inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// Keeps v in a register as computed (see gemm_r8_common.h's pin).
inline void pin(__m512i& v) { asm("" : "+v"(v)); }

// Two prefetches per weight line: into L2 kPrefetchL2 bytes ahead and into L1 kPrefetchL1 bytes
// ahead (a thread's groups follow each other in memory). Measured on the 4B Q4_K_M model, 2
// threads, `bench -p 16 -n 0 --spec-verify 4` (decode / 2-5-token verify steps, ms): no software
// prefetch 109 / 141-188; L1 only at 2 KB 88-93 / 106-120; L2 only at 8 KB 88-91 / 96-125; both
// (12 KB, 1.5 KB) 83-88 / 87-116. Distances from 8 to 24 KB (L2) and 1 to 2 KB (L1) were within
// the noise of each other.
// On an AMD EPYC Zen 4 VM (session 20) the hardware prefetchers alone stream a ONE-token product
// faster: 36 layers of 4B-shaped Q8_0 / Q4_K matrices, 2 threads, 1.19x / 1.17x without these
// prefetches (L1 only 1.03x, L2 only 0.82x), while 2-16-token calls lose 0.4-0.8x without them;
// so decode's choice is measured per machine at load (decode_prefetch.h).
constexpr int kPrefetchL2 = 12288;
constexpr int kPrefetchL1 = 1536;
template <bool kPrefetch>
__attribute__((always_inline)) inline void prefetch_line(const char* line) {
  if constexpr (kPrefetch) {
    _mm_prefetch(line + kPrefetchL2, _MM_HINT_T1);
    _mm_prefetch(line + kPrefetchL1, _MM_HINT_T0);
  }
}

template <int NT, bool kPrefetch>
void q4_k_tokens(int64_t nb, const PackedQ4K16* w, const BlockQ8_K* const* a, const int32_t* const* ex, float* y,
                 size_t y_stride, int n_rows) {
  const __m512i low_mask = _mm512_set1_epi8(0x0F);
  __m512 acc[NT], macc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = macc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const PackedQ4K16& x = w[b];
    const char* pf = reinterpret_cast<const char*>(&x);
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      __m512i s[NT];
      for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        prefetch_line<kPrefetch>(pf + 256 * j + 64 * v);
        const __m512i p = load512(x.qs[j][v]);
        __m512i lo = _mm512_and_si512(p, low_mask);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(p, 4), low_mask);
        pin(lo);
        pin(hi);
        for (int t = 0; t < NT; ++t) {
          const int8_t* q = a[t][b].qs + 32 * j + 4 * v;
          s[t] = _mm512_dpbusd_epi32(s[t], lo, bcast32(q));
          s[t] = _mm512_dpbusd_epi32(s[t], hi, bcast32(q + 16));
        }
      }
      const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.sc[j])));
      for (int t = 0; t < NT; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s[t], sc));
    }
    prefetch_line<kPrefetch>(pf + 2048);
    prefetch_line<kPrefetch>(pf + 2048 + 64);
    prefetch_line<kPrefetch>(pf + 2048 + 128);
    prefetch_line<kPrefetch>(pf + 2048 + 192);
    prefetch_line<kPrefetch>(pf + 2048 + 256);
    __m512i mins[NT];
    for (int t = 0; t < NT; ++t) mins[t] = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      const __m512i m = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.m[k])));
      for (int t = 0; t < NT; ++t) mins[t] = _mm512_dpwssd_epi32(mins[t], m, _mm512_set1_epi32(ex[t][16 * b + k]));
    }
    const __m512 d = load_f16x16(x.d), dmin = load_f16x16(x.dmin);
    for (int t = 0; t < NT; ++t) {
      const __m512 da = _mm512_set1_ps(a[t][b].d);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum[t]), acc[t]);
      macc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(mins[t]), macc[t]);
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << n_rows) - 1);
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, rows, _mm512_sub_ps(acc[t], macc[t]));
}

template <int NT, bool kPrefetch>
void q6_k_tokens(int64_t nb, const PackedQ6K16* w, const BlockQ8_K* const* a, const int32_t* const* ex, float* y,
                 size_t y_stride, int n_rows) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const PackedQ6K16& x = w[b];
    const char* pf = reinterpret_cast<const char*>(&x);
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    for (int k = 0; k < 16; ++k) {
      prefetch_line<kPrefetch>(pf + 128 * k);
      prefetch_line<kPrefetch>(pf + 128 * k + 64);
      prefetch_line<kPrefetch>(pf + 2048 + 64 * k);
      const __m512i l0 = load512(x.ql[k][0]), l1 = load512(x.ql[k][1]), h = load512(x.qh[k]);
      __m512i q0 = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
      __m512i q1 = _mm512_or_si512(_mm512_and_si512(l1, m4), _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
      __m512i q2 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4), _mm512_and_si512(h, m30));
      __m512i q3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                   _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
      pin(q0);
      pin(q1);
      pin(q2);
      pin(q3);
      const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.sc[k])));
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = a[t][b].qs + 16 * k;
        __m512i s = _mm512_set1_epi32(ex[t][16 * b + k]);  // -32 * bsum_k
        s = _mm512_dpbusd_epi32(s, q0, bcast32(q));
        s = _mm512_dpbusd_epi32(s, q1, bcast32(q + 4));
        s = _mm512_dpbusd_epi32(s, q2, bcast32(q + 8));
        s = _mm512_dpbusd_epi32(s, q3, bcast32(q + 12));
        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(s, sc));
      }
    }
    prefetch_line<kPrefetch>(pf + 3072);
    prefetch_line<kPrefetch>(pf + 3072 + 64);
    prefetch_line<kPrefetch>(pf + 3072 + 128);
    prefetch_line<kPrefetch>(pf + 3072 + 192);
    prefetch_line<kPrefetch>(pf + 3072 + 256);
    const __m512 d = load_f16x16(x.d);
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[t][b].d)), _mm512_cvtepi32_ps(isum[t]), acc[t]);
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << n_rows) - 1);
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
}

template <int NT, bool kPrefetch>
void q8_0_tokens(int64_t nb, const PackedQ8016* w, const BlockQ8_0A* const* a, const int32_t* const* ex, float* y,
                 size_t y_stride, int n_rows) {
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const PackedQ8016& x = w[b];
    const char* pf = reinterpret_cast<const char*>(&x);
    __m512i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm512_set1_epi32(ex[t][b]);  // -128 * sum of the block's a
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      prefetch_line<kPrefetch>(pf + 64 * v);
      __m512i q = load512(x.qs[v]);
      pin(q);
      for (int t = 0; t < NT; ++t) s[t] = _mm512_dpbusd_epi32(s[t], q, bcast32(a[t][b].qs + 4 * v));
    }
    const __m512 d = load_f16x16(x.d);
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[t][b].d)), _mm512_cvtepi32_ps(s[t]), acc[t]);
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << n_rows) - 1);
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
}

// Runs K<NT, kPrefetch> for NT = n (1 <= n <= kMax).
template <template <int, bool> class K, bool kPrefetch, int kMax, typename... Args>
void run_tokens(int n, Args... args) {
  if constexpr (kMax > 1) {
    if (n < kMax) {
      run_tokens<K, kPrefetch, kMax - 1>(n, args...);
      return;
    }
  }
  K<kMax, kPrefetch>::run(args...);
}

// PackedGemmFn: tokens in chunks of at most kMaxTokens, split evenly (10 tokens: 5 + 5 rather than
// 8 + 2), so a verify step of up to kMaxTokens tokens unpacks each weight vector once. kMaxTokens
// is what fits the 32 vector registers: Q4_K / Q6_K 12 (per token one int32 sub-block sum and one
// super-block total; the float accumulators live on the stack between super-blocks), Q8_0 12 (one
// int32 block sum and one float accumulator per token).
// Only the first chunk prefetches: later chunks find the group in L1 / L2. A one-token call (decode)
// prefetches only while packed_decode_prefetch() is on (packed_rows.h: the CPU backend measures at
// load which is faster on the machine).
template <typename Packed, typename Act, int kElements, int kMaxTokens, template <int, bool> class K>
void packed_gemm(int64_t n, const uint8_t* group, int n_rows, const void* act, size_t act_stride, const int32_t* extra,
                 size_t extra_stride, int n_act, float* y, size_t y_stride) {
  const int64_t nb = n / kElements;
  const auto* w = reinterpret_cast<const Packed*>(group);
  const auto* ab = static_cast<const uint8_t*>(act);
  const int chunks = (n_act + kMaxTokens - 1) / kMaxTokens;
  int t0 = 0;
  for (int c = 0; c < chunks; ++c) {
    const int nt = (n_act - t0) / (chunks - c);
    const Act* a[kMaxTokens];
    const int32_t* e[kMaxTokens];
    for (int i = 0; i < nt; ++i) {
      a[i] = reinterpret_cast<const Act*>(ab + (t0 + i) * act_stride);
      e[i] = extra + (t0 + i) * extra_stride;
    }
    if (c == 0 && (n_act > 1 || packed_decode_prefetch())) {
      run_tokens<K, true, kMaxTokens>(nt, nb, w, static_cast<const Act* const*>(a),
                                      static_cast<const int32_t* const*>(e), y + t0 * y_stride, y_stride, n_rows);
    } else {
      run_tokens<K, false, kMaxTokens>(nt, nb, w, static_cast<const Act* const*>(a),
                                       static_cast<const int32_t* const*>(e), y + t0 * y_stride, y_stride, n_rows);
    }
    t0 += nt;
  }
}

template <int NT, bool kPrefetch>
struct Q4K {
  static void run(int64_t nb, const PackedQ4K16* w, const BlockQ8_K* const* a, const int32_t* const* e, float* y,
                  size_t s, int r) {
    q4_k_tokens<NT, kPrefetch>(nb, w, a, e, y, s, r);
  }
};
template <int NT, bool kPrefetch>
struct Q6K {
  static void run(int64_t nb, const PackedQ6K16* w, const BlockQ8_K* const* a, const int32_t* const* e, float* y,
                  size_t s, int r) {
    q6_k_tokens<NT, kPrefetch>(nb, w, a, e, y, s, r);
  }
};
template <int NT, bool kPrefetch>
struct Q80 {
  static void run(int64_t nb, const PackedQ8016* w, const BlockQ8_0A* const* a, const int32_t* const* e, float* y,
                  size_t s, int r) {
    q8_0_tokens<NT, kPrefetch>(nb, w, a, e, y, s, r);
  }
};

}  // namespace

PackedGemmFn avx512_vnni_packed_gemm(DType dtype) {
  switch (dtype) {
    case DType::Q4_K: return packed_gemm<PackedQ4K16, BlockQ8_K, kBlockK, 12, Q4K>;
    case DType::Q6_K: return packed_gemm<PackedQ6K16, BlockQ8_K, kBlockK, 12, Q6K>;
    case DType::Q8_0: return packed_gemm<PackedQ8016, BlockQ8_0A, kBlockQ8_0, 12, Q80>;
    default: return nullptr;
  }
}

}  // namespace qs::kernels

#else
namespace qs::kernels {
PackedGemmFn avx512_vnni_packed_gemm(DType) { return nullptr; }
}  // namespace qs::kernels
#endif
