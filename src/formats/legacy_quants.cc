// Q8_0 and Q4_0 (32-element blocks with one f16 scale): reference quantize / dequantize.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/quantize.h"

namespace qs {

uint16_t fp32_to_fp16_round_up(float v) {
  if (!(v > 0.0f)) return 0;
  uint16_t h = fp32_to_fp16(v);
  if (h >= 0x7bffu) return 0x7bffu;  // largest finite half
  if (fp16_to_fp32(h) < v) ++h;      // positive halves grow with their bit pattern
  return h;
}

void quantize_row_q8_0(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    const float* x = src + b * kBlockQ8_0;
    float amax = 0.0f;
    for (int i = 0; i < kBlockQ8_0; ++i) amax = std::max(amax, std::fabs(x[i]));
    BlockQ8_0 block;
    block.d = fp32_to_fp16(amax / 127.0f);
    const float d = fp16_to_fp32(block.d);
    for (int i = 0; i < kBlockQ8_0; ++i) {
      const float q = d > 0.0f ? std::nearbyint(x[i] / d) : 0.0f;
      block.qs[i] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
    std::memcpy(out + b * sizeof(BlockQ8_0), &block, sizeof block);
  }
}

// The element of largest magnitude maps to -8 (the one level without a mirror), so the block's
// range is [-8|d|, 7|d|] oriented towards that element.
void quantize_row_q4_0(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    const float* x = src + b * kBlockQ8_0;
    float amax = 0.0f, extreme = 0.0f;
    for (int i = 0; i < kBlockQ8_0; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        extreme = x[i];
      }
    }
    BlockQ4_0 block;
    block.d = fp32_to_fp16(extreme / -8.0f);
    const float d = fp16_to_fp32(block.d);
    uint8_t q[kBlockQ8_0];
    for (int i = 0; i < kBlockQ8_0; ++i) {
      const float v = d != 0.0f ? std::nearbyint(x[i] / d) + 8.0f : 8.0f;
      q[i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 15.0f));
    }
    for (int i = 0; i < 16; ++i) block.qs[i] = static_cast<uint8_t>(q[i] | (q[i + 16] << 4));
    std::memcpy(out + b * sizeof(BlockQ4_0), &block, sizeof block);
  }
}

}  // namespace qs
