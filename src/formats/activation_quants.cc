// Activation quantization to int8 blocks (Q8_0A for Q8_0 / Q4_0 weights, Q8_K for K-quants).
#include <algorithm>
#include <cmath>

#include "formats/quantize.h"

namespace qs {
namespace {

// qs[i] = round(x[i] * (1 / d)) with d = max|x| / 127; returns d. Every step is exactly
// reproducible in SIMD (max, one division, multiply, round-to-nearest-even).
float quantize_block_int8(const float* x, int n, int8_t* qs) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < n; ++i) {
    qs[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f));
  }
  return d;
}

}  // namespace

void quantize_row_q8_0a(const float* src, BlockQ8_0A* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    dst[b].d = quantize_block_int8(src + b * kBlockQ8_0, kBlockQ8_0, dst[b].qs);
  }
}

void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    BlockQ8_K& block = dst[b];
    block.d = quantize_block_int8(src + b * kBlockK, kBlockK, block.qs);
    for (int k = 0; k < 16; ++k) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * k + i];
      block.bsums[k] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace qs
