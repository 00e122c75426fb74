// Vector exp() of x <= 0 for the kernels compiled once per ISA level (paged_attention_impl.h's
// softmax, norm_rope_impl.h's SiLU): Cody-Waite range reduction x = k ln2 + r, |r| <= ln2 / 2, and
// the degree-5 minimax polynomial of Cephes' expf (S. Moshier, Cephes Math Library),
// p(r) = 1 + r + r^2 (c0 + c1 r + .. + c5 r^5) evaluated by Horner from c5; max relative error
// ~2e-7 (about 3.4 f32 ulps) on [-87, 0]. Inputs below -87 are clamped to -87 (exp = 1.6e-38):
// callers that need exp() of smaller x handle those lanes themselves.
//
// Include only from the per-ISA implementation headers: everything here has internal linkage
// (anonymous namespace), so the copies compiled with different -m flags never merge at link time.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace qs::kernels {
namespace {

namespace exp_poly {
constexpr float kLowest = -87.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kC[6] = {5.0000001201e-1f, 1.6666665459e-1f, 4.1665795894e-2f,
                         8.3334519073e-3f, 1.3981999507e-3f, 1.9875691500e-4f};
}  // namespace exp_poly

#if defined(__AVX2__) && defined(__FMA__)
/// exp(x) on 8 lanes, x <= 0 (lanes below -87 give exp(-87)).
inline __m256 exp8_nonpositive(__m256 x) {
  using namespace exp_poly;
  const __m256 v = _mm256_max_ps(x, _mm256_set1_ps(kLowest));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), v);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kC[5]);
  for (int c = 4; c >= 0; --c) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC[c]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

#if defined(__AVX512F__)
/// exp(x) on 16 lanes, x <= 0: exp8_nonpositive's steps, 16 lanes wide.
inline __m512 exp16_nonpositive(__m512 x) {
  using namespace exp_poly;
  const __m512 v = _mm512_max_ps(x, _mm512_set1_ps(kLowest));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), v);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kC[5]);
  for (int c = 4; c >= 0; --c) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC[c]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}
#endif

}  // namespace
}  // namespace qs::kernels
