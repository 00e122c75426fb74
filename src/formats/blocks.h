// Block layouts of the ggml / GGUF quantized types, byte for byte.
//
// Source: the GGUF format description and ggml's block definitions ("ggml-common.h": block_q8_0,
// block_q4_0, block_q4_K, block_q5_K, block_q6_K, block_q8_K). All multi-byte fields are
// little-endian; `uint16_t d` fields hold IEEE binary16 bit patterns. Structs have no padding
// (checked by static_assert), so a row of n elements is n / kBlock* consecutive structs.
//
// | type  | elements | bytes | decode of element i                                           |
// |-------|----------|-------|---------------------------------------------------------------|
// | Q8_0  | 32       | 34    | d * qs[i]                                                      |
// | Q4_0  | 32       | 18    | d * (nibble(i) - 8); i < 16: low nibble of qs[i], else high of qs[i-16] |
// | Q4_K  | 256      | 144   | d * sc[j] * q4 - dmin * m[j]; j = i / 32, 6-bit sc/m packed     |
// | Q5_K  | 256      | 176   | d * sc[j] * q5 - dmin * m[j]; q5 = q4 | (qh bit) << 4           |
// | Q6_K  | 256      | 210   | d * scales[i / 16] * (q6 - 32)                                 |
//
// Activation blocks (our own, never stored in files): BlockQ8_0A (32 int8 + f32 scale) is what
// Q8_0/Q4_0 weights are dotted with; BlockQ8_K (256 int8 + f32 scale + per-16 sums) is what the
// K-quant weights are dotted with.
#pragma once

#include <cstdint>
#include <cstring>

namespace qs {

inline constexpr int kBlockQ8_0 = 32;   // elements per Q8_0 / Q4_0 / Q8_0A block
inline constexpr int kBlockK = 256;     // elements per K-quant super-block (QK_K)
inline constexpr int kScaleBytesK = 12; // packed 6-bit scales + mins of Q4_K / Q5_K
inline constexpr int kSubBlocks = 8;    // Q4_K / Q5_K sub-blocks of 32
inline constexpr int kSubBlock = 32;

/// Q8_0: 32 int8 quants with one f16 scale; x[i] = d * qs[i]. 34 bytes.
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

/// Q4_0: 32 4-bit quants with one f16 scale. Element i < 16 is the low nibble of qs[i], element
/// i >= 16 the high nibble of qs[i - 16]; x = d * (nibble - 8). 18 bytes.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

/// Q4_K: 256 elements in 8 sub-blocks of 32. Each sub-block j has a 6-bit scale sc[j] and a 6-bit
/// min m[j] packed in `scales` (see unpack_scale_min_k4); x = d * sc[j] * q - dmin * m[j] with q in
/// 0..15. Quants: for chunk c = 0..3 (64 elements), element 64c + l (l < 32) is the low nibble of
/// qs[32c + l] and element 64c + 32 + l the high nibble. 144 bytes.
struct BlockQ4_K {
  uint16_t d;     // f16 scale of the sub-block scales
  uint16_t dmin;  // f16 scale of the sub-block mins
  uint8_t scales[kScaleBytesK];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

/// Q5_K: as Q4_K with a fifth bit per element: bit (2c) of qh[l] is the high bit of element
/// 64c + l, bit (2c + 1) that of element 64c + 32 + l; q in 0..31. 176 bytes.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kScaleBytesK];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

/// Q6_K: 256 elements in 16 sub-blocks of 16 with int8 scales; x = d * scales[i / 16] * (q - 32),
/// q in 0..63. For half h = 0..1 (128 elements) and l = 0..31, with L = ql + 64h, H = qh + 32h:
///   element 128h + l      = low nibble of L[l]       | ((H[l] >> 0) & 3) << 4
///   element 128h + 32 + l = low nibble of L[l + 32]  | ((H[l] >> 2) & 3) << 4
///   element 128h + 64 + l = high nibble of L[l]      | ((H[l] >> 4) & 3) << 4
///   element 128h + 96 + l = high nibble of L[l + 32] | ((H[l] >> 6) & 3) << 4
/// 210 bytes.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

/// Activation block for Q8_0 / Q4_0 dots: x[i] = d * qs[i], qs in -127..127. 36 bytes.
struct BlockQ8_0A {
  float d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0A) == 36);

/// Activation block for K-quant dots: x[i] = d * qs[i], qs in -127..127, and
/// bsums[k] = sum of qs[16k .. 16k + 15]. 292 bytes.
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_K) == 292);

/// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block. Layout (ggml
/// get_scale_min_k4): j < 4: sc = s[j] & 63, m = s[j + 4] & 63; j >= 4: the low 4 bits are the
/// nibbles of s[j + 4] (scale low, min high) and the top 2 bits are bits 6..7 of s[j - 4] (scale)
/// and s[j] (min).
inline void unpack_scale_min_k4(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

/// All 8 scales and mins of a Q4_K / Q5_K block at once (same values as unpack_scale_min_k4):
/// byte j of *sc8 is sc[j], byte j of *m8 is m[j]. Four 32-bit masks instead of 16 branches.
inline void unpack_scales_mins_k4(const uint8_t* s, uint64_t* sc8, uint64_t* m8) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
  const uint64_t sc_lo = u[0] & low6;  // sc[0..3]
  const uint64_t m_lo = u[1] & low6;   // m[0..3]
  const uint64_t sc_hi = (u[2] & low4) | (((u[0] >> 6) & low2) << 4);
  const uint64_t m_hi = ((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4);
  *sc8 = sc_lo | sc_hi << 32;
  *m8 = m_lo | m_hi << 32;
}

}  // namespace qs
