// Q4_K, Q5_K and Q6_K (256-element super-blocks): reference quantize / dequantize.
//
// Quantizer design (ours, simpler than ggml's iterative search): per sub-block, an offset
// (Q4_K/Q5_K) and a step are chosen so the sub-block's [min, max] is covered without clamping,
// then the 6-bit (8-bit for Q6_K) sub-block scales are rounded *up* against an f16 super-scale
// that is itself rounded up. Every element then rounds to its nearest level: |err| <= step / 2.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/quantize.h"

namespace qs {
namespace {

// Inverse of unpack_scale_min_k4: sc and m are 6-bit values for sub-blocks 0..7.
void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t s[kScaleBytesK]) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
  }
}

uint8_t ceil_ratio(float value, float unit, int max_level) {
  if (!(unit > 0.0f)) return 0;
  const float r = std::ceil(value / unit);
  return static_cast<uint8_t>(std::clamp(r, 0.0f, static_cast<float>(max_level)));
}

// Shared by Q4_K (levels = 15) and Q5_K (levels = 31): fills d, dmin, packed scales and the
// per-element levels q[256] for one super-block.
void quantize_superblock_min_scale(const float* x, int levels, uint16_t* d_out, uint16_t* dmin_out,
                                   uint8_t scales[kScaleBytesK], uint8_t q[kBlockK]) {
  float offset[kSubBlocks], high[kSubBlocks];
  float max_offset = 0.0f;
  for (int j = 0; j < kSubBlocks; ++j) {
    const float* s = x + j * kSubBlock;
    float lo = s[0], hi = s[0];
    for (int i = 1; i < kSubBlock; ++i) {
      lo = std::min(lo, s[i]);
      hi = std::max(hi, s[i]);
    }
    offset[j] = std::max(0.0f, -lo);  // decoded value = step * q - offset
    high[j] = hi;
    max_offset = std::max(max_offset, offset[j]);
  }
  *dmin_out = fp32_to_fp16_round_up(max_offset / 63.0f);
  const float dmin = fp16_to_fp32(*dmin_out);
  uint8_t m[kSubBlocks], sc[kSubBlocks];
  float need[kSubBlocks], max_need = 0.0f;
  for (int j = 0; j < kSubBlocks; ++j) {
    m[j] = ceil_ratio(offset[j], dmin, 63);
    need[j] = std::max(0.0f, (high[j] + dmin * m[j]) / static_cast<float>(levels));
    max_need = std::max(max_need, need[j]);
  }
  *d_out = fp32_to_fp16_round_up(max_need / 63.0f);
  const float d = fp16_to_fp32(*d_out);
  for (int j = 0; j < kSubBlocks; ++j) {
    sc[j] = ceil_ratio(need[j], d, 63);
    const float step = d * sc[j];
    const float shift = dmin * m[j];
    for (int i = 0; i < kSubBlock; ++i) {
      const float v = step > 0.0f ? std::nearbyint((x[j * kSubBlock + i] + shift) / step) : 0.0f;
      q[j * kSubBlock + i] = static_cast<uint8_t>(std::clamp(v, 0.0f, static_cast<float>(levels)));
    }
  }
  pack_scale_min_k4(sc, m, scales);
}

}  // namespace

void quantize_row_q4_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    BlockQ4_K block;
    uint8_t q[kBlockK];
    quantize_superblock_min_scale(src + b * kBlockK, 15, &block.d, &block.dmin, block.scales, q);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        block.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
      }
    }
    std::memcpy(out + b * sizeof block, &block, sizeof block);
  }
}

void quantize_row_q5_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    BlockQ5_K block;
    uint8_t q[kBlockK];
    quantize_superblock_min_scale(src + b * kBlockK, 31, &block.d, &block.dmin, block.scales, q);
    std::memset(block.qh, 0, sizeof block.qh);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        block.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
        block.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
    std::memcpy(out + b * sizeof block, &block, sizeof block);
  }
}

// Q6_K: symmetric, levels q - 32 in -32..31 with an int8 scale per 16 elements.
void quantize_row_q6_k(const float* src, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    const float* x = src + b * kBlockK;
    float need[16], max_need = 0.0f;
    for (int k = 0; k < 16; ++k) {
      float hi = 0.0f, lo = 0.0f;
      for (int i = 0; i < 16; ++i) {
        hi = std::max(hi, x[16 * k + i]);
        lo = std::min(lo, x[16 * k + i]);
      }
      need[k] = std::max(hi / 31.0f, -lo / 32.0f);
      max_need = std::max(max_need, need[k]);
    }
    BlockQ6_K block;
    block.d = fp32_to_fp16_round_up(max_need / 127.0f);
    const float d = fp16_to_fp32(block.d);
    uint8_t q[kBlockK];
    for (int k = 0; k < 16; ++k) {
      const uint8_t sc = ceil_ratio(need[k], d, 127);
      block.scales[k] = static_cast<int8_t>(sc);
      const float step = d * sc;
      for (int i = 0; i < 16; ++i) {
        const float v = step > 0.0f ? std::nearbyint(x[16 * k + i] / step) + 32.0f : 32.0f;
        q[16 * k + i] = static_cast<uint8_t>(std::clamp(v, 0.0f, 63.0f));
      }
    }
    std::memset(block.qh, 0, sizeof block.qh);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qq = q + 128 * h;
      for (int l = 0; l < 32; ++l) {
        block.ql[64 * h + l] = static_cast<uint8_t>((qq[l] & 0x0F) | ((qq[64 + l] & 0x0F) << 4));
        block.ql[64 * h + 32 + l] =
            static_cast<uint8_t>((qq[32 + l] & 0x0F) | ((qq[96 + l] & 0x0F) << 4));
        block.qh[32 * h + l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[32 + l] >> 4) << 2) |
                                                    ((qq[64 + l] >> 4) << 4) | ((qq[96 + l] >> 4) << 6));
      }
    }
    std::memcpy(out + b * sizeof block, &block, sizeof block);
  }
}

}  // namespace qs
