// Helpers and the group driver shared by the repacking GEMMs of each ISA level (gemm_r8_avx2.cc,
// gemm_r8_avx512_vnni.cc). Only for files compiled with at least AVX2 + FMA + F16C. Everything
// here has internal linkage (unnamed namespace): each including file, compiled with its own ISA
// flags, keeps its own copy, and no weak symbol can let the linker pick another level's code
// (tests/scripts/check_isa_objects.py checks the objects).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

namespace qs::kernels::r8 {
namespace {  // NOLINT(google-build-namespaces, cert-dcl59-cpp): see above

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Keeps v in a register as computed: stops GCC from re-associating accumulator chains into trees
// through the stack and from re-loading a reused weight vector at every use.
inline void pin(__m256i& v) { asm("" : "+x"(v)); }

// out[v] lane r = in[r] lane v (8 x 8 transpose of 32-bit words).
inline void transpose8x8_epi32(__m256i m[8]) {
  const __m256i t0 = _mm256_unpacklo_epi32(m[0], m[1]), t1 = _mm256_unpackhi_epi32(m[0], m[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(m[2], m[3]), t3 = _mm256_unpackhi_epi32(m[2], m[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(m[4], m[5]), t5 = _mm256_unpackhi_epi32(m[4], m[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(m[6], m[7]), t7 = _mm256_unpackhi_epi32(m[6], m[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  m[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
  m[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
  m[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
  m[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
  m[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
  m[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
  m[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
  m[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

// Row r of the group, clamped: rows past n_rows repeat the last real row (their results are
// computed and dropped).
inline const uint8_t* group_row(const uint8_t* w, size_t w_stride, int n_rows, int r) {
  return w + static_cast<size_t>(r < n_rows ? r : n_rows - 1) * w_stride;
}

// Stores lanes r < n_rows of v to y[r].
inline void store_rows(__m256 v, int n_rows, float* y) {
  if (n_rows == 8) {
    _mm256_storeu_ps(y, v);
    return;
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  for (int r = 0; r < n_rows; ++r) y[r] = l[r];
}

// --- the group driver ---------------------------------------------------------------------------

// Token kernels of one type: K::run<NT>(nb, packed, a, y, y_stride, n_rows) for NT = 1 .. kTile.
template <typename K, int NT, typename Packed, typename Act>
void run_tail(int n, int64_t nb, const Packed* packed, const Act* const* a, float* y, size_t y_stride, int n_rows) {
  if constexpr (NT > 0) {
    if (n == NT) {
      K::template run<NT>(nb, packed, a, y, y_stride, n_rows);
    } else {
      run_tail<K, NT - 1>(n, nb, packed, a, y, y_stride, n_rows);
    }
  }
}

template <typename Packed, typename Act, int kElements, int kTile,
          void (*kRepack)(int64_t, const uint8_t*, size_t, int, Packed*), typename K>
void group_gemm(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act, size_t act_stride,
                int n_act, float* y, size_t y_stride, uint8_t* scratch) {
  const int64_t nb = n / kElements;
  auto* packed = reinterpret_cast<Packed*>(scratch);
  kRepack(nb, static_cast<const uint8_t*>(w), w_stride, n_rows, packed);
  const auto* ab = static_cast<const uint8_t*>(act);
  const Act* a[kTile];
  for (int t = 0; t < n_act; t += kTile) {
    const int nt = n_act - t < kTile ? n_act - t : kTile;
    for (int i = 0; i < nt; ++i) a[i] = reinterpret_cast<const Act*>(ab + (t + i) * act_stride);
    if (nt == kTile) {
      K::template run<kTile>(nb, packed, a, y + t * y_stride, y_stride, n_rows);
    } else {
      run_tail<K, kTile - 1>(nt, nb, packed, a, y + t * y_stride, y_stride, n_rows);
    }
  }
}

}  // namespace
}  // namespace qs::kernels::r8
#endif
