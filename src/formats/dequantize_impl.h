// Row decoders of every weight type, compiled once per ISA level: included only by dequantize.cc
// (baseline flags) and dequantize_avx2.cc (-mavx2 -mfma -mf16c). Formulas follow ggml's
// dequantize_row_* (layouts in formats/blocks.h). On AVX2 the compiler vectorizes the loops and
// contracts Q4_K / Q5_K's `step * q - shift` into one FMA (as -march=native builds did), and F16
// rows use the F16C conversion instruction (exact, like fp16_to_fp32). Internal linkage (anonymous
// namespace) keeps the two compilations apart at link time.
#pragma once

#include <cstdint>
#include <cstring>

#include "formats/blocks.h"
#include "formats/dtype.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace qs {
namespace {

// Decodes one Q4_K / Q5_K super-block given its per-element levels q[256].
void decode_min_scale(uint16_t d_bits, uint16_t dmin_bits, const uint8_t scales[kScaleBytesK],
                      const uint8_t q[kBlockK], float* y) {
  const float d = fp16_to_fp32(d_bits);
  const float dmin = fp16_to_fp32(dmin_bits);
  for (int j = 0; j < kSubBlocks; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, scales, &sc, &m);
    const float step = d * sc;
    const float shift = dmin * m;
    for (int i = 0; i < kSubBlock; ++i) y[j * kSubBlock + i] = step * q[j * kSubBlock + i] - shift;
  }
}


void decode_q8_0(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    BlockQ8_0 block;
    std::memcpy(&block, in + b * sizeof(BlockQ8_0), sizeof block);
    const float d = fp16_to_fp32(block.d);
    for (int i = 0; i < kBlockQ8_0; ++i) dst[b * kBlockQ8_0 + i] = d * static_cast<float>(block.qs[i]);
  }
}

void decode_q4_0(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    BlockQ4_0 block;
    std::memcpy(&block, in + b * sizeof(BlockQ4_0), sizeof block);
    const float d = fp16_to_fp32(block.d);
    float* y = dst + b * kBlockQ8_0;
    for (int i = 0; i < 16; ++i) {
      y[i] = d * static_cast<float>((block.qs[i] & 0x0F) - 8);
      y[i + 16] = d * static_cast<float>((block.qs[i] >> 4) - 8);
    }
  }
}

void decode_q4_k(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    BlockQ4_K block;
    std::memcpy(&block, in + b * sizeof block, sizeof block);
    uint8_t q[kBlockK];
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        q[64 * c + l] = block.qs[32 * c + l] & 0x0F;
        q[64 * c + 32 + l] = block.qs[32 * c + l] >> 4;
      }
    }
    decode_min_scale(block.d, block.dmin, block.scales, q, dst + b * kBlockK);
  }
}

void decode_q5_k(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    BlockQ5_K block;
    std::memcpy(&block, in + b * sizeof block, sizeof block);
    uint8_t q[kBlockK];
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        q[64 * c + l] = static_cast<uint8_t>((block.qs[32 * c + l] & 0x0F) |
                                             (((block.qh[l] >> (2 * c)) & 1) << 4));
        q[64 * c + 32 + l] = static_cast<uint8_t>((block.qs[32 * c + l] >> 4) |
                                                  (((block.qh[l] >> (2 * c + 1)) & 1) << 4));
      }
    }
    decode_min_scale(block.d, block.dmin, block.scales, q, dst + b * kBlockK);
  }
}

void decode_q6_k(const void* src, float* dst, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    BlockQ6_K block;
    std::memcpy(&block, in + b * sizeof block, sizeof block);
    const float d = fp16_to_fp32(block.d);
    float* y = dst + b * kBlockK;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = block.ql + 64 * h;
      const uint8_t* qh = block.qh + 32 * h;
      const int8_t* sc = block.scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        const int s = l / 16;
        y[128 * h + l] = d * static_cast<float>(sc[s] * q0);
        y[128 * h + 32 + l] = d * static_cast<float>(sc[s + 2] * q1);
        y[128 * h + 64 + l] = d * static_cast<float>(sc[s + 4] * q2);
        y[128 * h + 96 + l] = d * static_cast<float>(sc[s + 6] * q3);
      }
    }
  }
}

void decode_f16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    dst[i] = fp16_to_fp32(h);
  }
}

void decode_bf16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
    std::memcpy(dst + i, &bits, 4);
  }
}

// Decodes n elements of `dtype` (n a multiple of the block size, checked by the caller); returns
// false for a type it does not know.
bool decode_row(DType dtype, const void* src, float* dst, int64_t n) {
  switch (dtype) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return true;
    case DType::F16: decode_f16(src, dst, n); return true;
    case DType::BF16: decode_bf16(src, dst, n); return true;
    case DType::Q8_0: decode_q8_0(src, dst, n); return true;
    case DType::Q4_0: decode_q4_0(src, dst, n); return true;
    case DType::Q4_K: decode_q4_k(src, dst, n); return true;
    case DType::Q5_K: decode_q5_k(src, dst, n); return true;
    case DType::Q6_K: decode_q6_k(src, dst, n); return true;
  }
  return false;
}

}  // namespace
}  // namespace qs
