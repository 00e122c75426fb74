// Packed Q4_K matmul (packed_rows.h) with AMX-INT8 tiles, for prefill: whole chunks of 16 tokens
// run as tile products; fewer tokens (decode, speculative verify steps) and a chunk's remainder stay
// on the AVX-512 VNNI kernel of packed_rows_avx512_vnni.cc.
//
// Why only there: the tiles need the weights as bytes in memory, so every super-block is unpacked
// (nibbles, scales folded in: 128 vpmullw and 8 KB of stores per 16 rows) before a tile load can
// read it. Shared by 16+ tokens that costs less than the VNNI kernel's per-token work (per token and
// 16 rows x 256 weights: 64 vpdpbusd, 8 vpmulld, 8 adds); at the 2-9 tokens of a verify step it
// costs more (measured 5-25% slower, 1 thread, weights in L2 and streamed).
//
// Per super-block and 16-row group:
//   1. The 6-bit sub-block scales are split, sc = 8 sh + sl (sh, sl in 0..7), and folded into two
//      byte matrices BL = q * sl and BH = q * sh (q <= 15, so both <= 105: one vpmullw per vector
//      with the row's part in both 16-bit words; no carry between the two bytes of a word), in the
//      layout the packed format already has (a 64-byte vector = 4 consecutive K elements of each of
//      the 16 rows = one B-tile row; sub-block j = 8 rows, low nibbles elements 0-15, high 16-31).
//   2. Per chunk of 16 tokens C_lo = A x BL and C_hi = A x BH over K = 256 (4 tdpbsud each: signed
//      A = the tokens' int8 activations read in place from their Q8_K rows, unsigned B), so
//      total = 8 C_hi + C_lo = sum_j sc_j sum_k q a exactly.
//   3. Per token the VNNI kernel's float steps: mins by vpdpwssd against the prepared activation
//      sums, acc = fma(d * d_a, float(total), acc), macc = fma(dmin * d_a, float(mins), macc).
// The int32 totals are the same integers as the VNNI and row-major kernels' and the float sequence
// is the same, so results are bit-identical to them (tests/backend/cpu/packed_rows_test.cc).
//
// Tiles (palette 1, configured per thread, re-configured only when the shape changes): tmm0, tmm1
// = C_lo, C_hi (16 rows x 64 bytes), tmm2, tmm3 = A (16 x 64 bytes), tmm4 .. tmm7 = B (16 x 64 bytes;
// tmm4 / tmm5 keep sub-blocks 0-1 across the chunks of a super-block).
// Linux grants the tile data state per process on request (arch_prctl ARCH_REQ_XCOMP_PERM), which
// detected_cpu_isa() makes before it reports the amx level (core/cpu_isa.cc).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/packed_rows.h"

// gcc defines __AMX_TILE__ / __AMX_INT8__ for -mamx-tile / -mamx-int8, clang 14 __AMXTILE__ / __AMXINT8__.
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_INT8__) || defined(__AMXINT8__)) && \
    defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

// gcc 12 reports the intrinsics' own undefined-vector idiom (_mm512_undefined_*) as uninitialized.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace qs::kernels {
namespace {

constexpr int kMaxTileTokens = 16;  // the rows of an A / C tile

// The LDTILECFG memory operand (Intel SDM vol. 1, 18.2: palette, start row, 14 reserved bytes,
// 16 column widths in bytes, 16 row counts).
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

// Loads this thread's tile configuration for m tokens and K = k_bytes per tile product unless it
// is already loaded.
void configure_tiles(int m, int k_bytes) {
  thread_local int configured = 0;
  const int key = m * 64 + k_bytes;
  if (configured == key) return;
  TileConfig cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.palette_id = 1;
  for (int c = 0; c < 2; ++c) {
    cfg.rows[c] = static_cast<uint8_t>(m);  // C
    cfg.colsb[c] = 64;
    cfg.rows[2 + c] = static_cast<uint8_t>(m);  // A
    cfg.colsb[2 + c] = static_cast<uint16_t>(k_bytes);
  }
  for (int c = 4; c < 8; ++c) {
    cfg.rows[c] = static_cast<uint8_t>(k_bytes / 4);  // B
    cfg.colsb[c] = 64;
  }
  _tile_loadconfig(&cfg);
  configured = key;
}

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Prefetch distances as in packed_rows_avx512_vnni.cc (L2 12 KB, L1 1.5 KB ahead).
constexpr int kPrefetchL2 = 12288;
constexpr int kPrefetchL1 = 1536;
template <bool kPrefetch>
__attribute__((always_inline)) inline void prefetch_line(const char* line) {
  if constexpr (kPrefetch) {
    _mm_prefetch(line + kPrefetchL2, _MM_HINT_T1);
    _mm_prefetch(line + kPrefetchL1, _MM_HINT_T0);
  }
}

constexpr size_t kQsOffset = offsetof(BlockQ8_K, qs);

// Q4_K: n_chunks chunks of kMaxTileTokens tokens (rows of `act` at act_stride, BlockQ8_K), Q4_K
// mins terms in ex; the float accumulators live in `scratch` (2 * 16 floats per token).
// The 6-bit sub-block scale is split, sc = 8 * sh + sl (sh, sl in 0..7), and folded into two byte
// matrices BL = q * sl and BH = q * sh (q <= 15, so both <= 105: one vpmullw per 32 byte pairs, no
// carry between the bytes); then C_lo = A x BL and C_hi = A x BH over the whole super-block (K =
// 256, 4 tile products each) give total = sum_j sc_j * sum_k q a = 8 * C_hi + C_lo, the same
// integer as the VNNI kernel's, and per token only the float step is left. A super-block is
// unpacked once for all chunks.
template <bool kPrefetch>
void q4_k_amx(int64_t nb, const PackedQ4K16* w, const uint8_t* act, size_t act_stride, const int32_t* ex,
              size_t ex_stride, int n_chunks, float* scratch, float* y, size_t y_stride, int n_rows) {
  alignas(64) uint8_t bl[8][8][64], bh[8][8][64];  // per sub-block 8 B rows: K elements 32j .. 32j + 31
  alignas(64) int32_t clo[kMaxTileTokens][16], chi[kMaxTileTokens][16];
  const int n_tokens = n_chunks * kMaxTileTokens;
  float* acc = scratch;                  // [n_tokens][16]
  float* macc = scratch + 16 * n_tokens;  // [n_tokens][16]
  for (int i = 0; i < 32 * n_tokens; i += 16) _mm512_storeu_ps(scratch + i, _mm512_setzero_ps());
  const __m512i low_mask = _mm512_set1_epi8(0x0F), seven = _mm512_set1_epi32(7);
  for (int64_t b = 0; b < nb; ++b) {
    const PackedQ4K16& x = w[b];
    const char* pf = reinterpret_cast<const char*>(&x);
    for (int j = 0; j < 8; ++j) {
      // Lane r of sl / sh: the row's scale part in both 16-bit words (the multiplier of vpmullw).
      const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.sc[j])));
      __m512i sl = _mm512_and_si512(sc, seven), sh = _mm512_srli_epi32(sc, 3);
      sl = _mm512_or_si512(sl, _mm512_slli_epi32(sl, 16));
      sh = _mm512_or_si512(sh, _mm512_slli_epi32(sh, 16));
      for (int v = 0; v < 4; ++v) {
        prefetch_line<kPrefetch>(pf + 256 * j + 64 * v);
        const __m512i p = load512(x.qs[j][v]);
        const __m512i lo = _mm512_and_si512(p, low_mask);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(p, 4), low_mask);
        _mm512_store_si512(bl[j][v], _mm512_mullo_epi16(lo, sl));
        _mm512_store_si512(bl[j][4 + v], _mm512_mullo_epi16(hi, sl));
        _mm512_store_si512(bh[j][v], _mm512_mullo_epi16(lo, sh));
        _mm512_store_si512(bh[j][4 + v], _mm512_mullo_epi16(hi, sh));
      }
    }
    for (int i = 0; i < 5; ++i) prefetch_line<kPrefetch>(pf + 2048 + 64 * i);
    __m512i mn[4];
    for (int k = 0; k < 4; ++k) mn[k] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.m[k])));
    const __m512 d = load_f16x16(x.d), dmin = load_f16x16(x.dmin);
    _tile_loadd(4, bl[0], 64);
    _tile_loadd(5, bh[0], 64);
    for (int c = 0; c < n_chunks; ++c) {
      const uint8_t* ac = act + static_cast<size_t>(c) * kMaxTileTokens * act_stride;
      const uint8_t* a0 = ac + static_cast<size_t>(b) * sizeof(BlockQ8_K) + kQsOffset;
      _tile_zero(0);
      _tile_zero(1);
      _tile_loadd(2, a0, act_stride);
      _tile_loadd(6, bl[2], 64);
      _tile_loadd(7, bh[2], 64);
      _tile_dpbsud(0, 2, 4);
      _tile_dpbsud(1, 2, 5);
      _tile_loadd(3, a0 + 64, act_stride);
      _tile_dpbsud(0, 3, 6);
      _tile_dpbsud(1, 3, 7);
      _tile_loadd(2, a0 + 128, act_stride);
      _tile_loadd(6, bl[4], 64);
      _tile_loadd(7, bh[4], 64);
      _tile_dpbsud(0, 2, 6);
      _tile_dpbsud(1, 2, 7);
      _tile_loadd(3, a0 + 192, act_stride);
      _tile_loadd(6, bl[6], 64);
      _tile_loadd(7, bh[6], 64);
      _tile_dpbsud(0, 3, 6);
      _tile_dpbsud(1, 3, 7);
      _tile_stored(0, clo, 64);
      _tile_stored(1, chi, 64);
      for (int i = 0; i < kMaxTileTokens; ++i) {
        const int t = c * kMaxTileTokens + i;
        const __m512i isum = _mm512_add_epi32(_mm512_slli_epi32(load512(chi[i]), 3), load512(clo[i]));
        const int32_t* e = ex + t * ex_stride + 16 * b;
        __m512i mins = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) mins = _mm512_dpwssd_epi32(mins, mn[k], _mm512_set1_epi32(e[k]));
        const auto* at = reinterpret_cast<const BlockQ8_K*>(ac + i * act_stride);
        const __m512 da = _mm512_set1_ps(at[b].d);
        _mm512_storeu_ps(acc + 16 * t, _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum),
                                                       _mm512_loadu_ps(acc + 16 * t)));
        _mm512_storeu_ps(macc + 16 * t, _mm512_fmadd_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(mins),
                                                        _mm512_loadu_ps(macc + 16 * t)));
      }
    }
  }
  const __mmask16 rows = static_cast<__mmask16>((1u << n_rows) - 1);
  for (int t = 0; t < n_tokens; ++t) {
    _mm512_mask_storeu_ps(y + t * y_stride, rows, _mm512_sub_ps(_mm512_loadu_ps(acc + 16 * t), _mm512_loadu_ps(macc + 16 * t)));
  }
}

// Q4_K: whole chunks of 16 tokens on the tiles, the rest (and calls of fewer tokens: decode and
// verify steps, where the VNNI kernel keeps up with memory) on the VNNI kernel.
void q4_k_packed_gemm(int64_t n, const uint8_t* group, int n_rows, const void* act, size_t act_stride,
                      const int32_t* extra, size_t extra_stride, int n_act, float* y, size_t y_stride) {
  static const PackedGemmFn vnni = avx512_vnni_packed_gemm(DType::Q4_K);
  const int n_chunks = n_act / kMaxTileTokens;
  const int tiled = n_chunks * kMaxTileTokens;
  if (n_chunks > 0) configure_tiles(kMaxTileTokens, 64);
  // Up to kChunksPerPass chunks share one unpacking of a super-block (their float accumulators,
  // 2 x 16 floats per token, on the stack: 64 KB).
  constexpr int kChunksPerPass = 32;
  alignas(64) float scratch[32 * kMaxTileTokens * kChunksPerPass];
  const auto* w = reinterpret_cast<const PackedQ4K16*>(group);
  const auto* a = static_cast<const uint8_t*>(act);
  for (int c0 = 0; c0 < n_chunks; c0 += kChunksPerPass) {
    const int nc = n_chunks - c0 < kChunksPerPass ? n_chunks - c0 : kChunksPerPass;
    const int t0 = c0 * kMaxTileTokens;
    if (c0 == 0) {
      q4_k_amx<true>(n / kBlockK, w, a + t0 * act_stride, act_stride, extra + t0 * extra_stride, extra_stride, nc,
                     scratch, y + t0 * y_stride, y_stride, n_rows);
    } else {
      q4_k_amx<false>(n / kBlockK, w, a + t0 * act_stride, act_stride, extra + t0 * extra_stride, extra_stride, nc,
                      scratch, y + t0 * y_stride, y_stride, n_rows);
    }
  }
  if (tiled < n_act) {
    vnni(n, group, n_rows, static_cast<const uint8_t*>(act) + tiled * act_stride, act_stride,
         extra + tiled * extra_stride, extra_stride, n_act - tiled, y + tiled * y_stride, y_stride);
  }
}

}  // namespace

PackedGemmFn amx_packed_gemm(DType dtype) {
  if (avx512_vnni_packed_gemm(dtype) == nullptr) return nullptr;  // the one-token path
  switch (dtype) {
    case DType::Q4_K: return q4_k_packed_gemm;
    default: return nullptr;
  }
}

const DotKernels* amx_dot_kernels() {
  const DotKernels* vnni = avx512_vnni_dot_kernels();
  if (vnni == nullptr) return nullptr;
  static const DotKernels table = [vnni] {
    // Everything of the avx512_vnni level except the packed Q4_K matmul. Q6_K stays on VNNI (its
    // int8 sub-block scales do not fold into bytes; per-sub-block tile sums were at most 1.1x
    // faster at 16-64 tokens, slower below), Q8_0 too (a float step per 16-element half block
    // leaves a tile product little to save).
    DotKernels t = *vnni;
    t.isa = CpuIsa::kAmx;
    t.q4_k_packed = amx_packed_gemm(DType::Q4_K);
    return t;
  }();
  return &table;
}

}  // namespace qs::kernels

#else
namespace qs::kernels {
PackedGemmFn amx_packed_gemm(DType) { return nullptr; }
const DotKernels* amx_dot_kernels() { return nullptr; }
}  // namespace qs::kernels
#endif
