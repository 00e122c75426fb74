// Element types: binary16 / bfloat16 conversions, row layout and row dequantization.
//
// References are independent of src/formats/dtype.cc: the F16C instructions (_cvtsh_ss, _cvtss_sh)
// for IEEE binary16 (compiled for F16C per function; tests that need them skip on CPUs without), float64 decoders written here from the format definitions, and the GGUF spec for
// ggml type ids and block sizes.
#include <gtest/gtest.h>
#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "core/error.h"

namespace qs {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

bool half_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }

// The hardware references; call only when cpu_has_f16c().
// CPUID leaf 1, ECX bit 29, as src/core/cpu_isa.cc: clang 14's __builtin_cpu_supports does not
// know "f16c" (the sanitizer build compiles this file with clang).
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

__attribute__((target("f16c"))) uint16_t hw_fp32_to_fp16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("f16c"))) float hw_fp16_to_fp32(uint16_t h) { return _cvtsh_ss(h); }

#define QS_SKIP_WITHOUT_F16C() \
  if (!cpu_has_f16c()) GTEST_SKIP() << "the CPU lacks F16C, the reference of this test"

// binary16 value from its fields (IEEE 754: bias 15, 10 fraction bits), in double.
double decode_half(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);
  } else if (e == 31) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  }
  return sign ? -v : v;
}

// |value| of a bfloat16 pattern from its fields (bias 127, 7 fraction bits), in double. Exponent
// 255 is decoded as if it were finite (2^128 for 0x7f80), which is the "next value" that IEEE
// round-to-nearest uses to decide overflow to infinity.
double decode_bf16_magnitude_unbounded(uint16_t b) {
  const int e = (b >> 7) & 0xff;
  const int m = b & 0x7f;
  if (e == 0) return std::ldexp(static_cast<double>(m), -133);
  return std::ldexp(static_cast<double>(128 + m), e - 134);
}

double decode_bf16(uint16_t b) {
  const int e = (b >> 7) & 0xff;
  const int m = b & 0x7f;
  double v = decode_bf16_magnitude_unbounded(b);
  if (e == 255) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  }
  return (b & 0x8000u) ? -v : v;
}

// Round-to-nearest-even binary32 -> bfloat16 from the definition: pick the nearer of the two
// bfloat16 neighbours of |x| (truncation and the next pattern up), ties to the even pattern.
uint16_t reference_fp32_to_bf16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7f80u);  // infinity is exact
  const uint16_t lo = static_cast<uint16_t>(abs >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double value = std::fabs(static_cast<double>(f));
  const double d_lo = value - decode_bf16_magnitude_unbounded(lo);
  const double d_hi = decode_bf16_magnitude_unbounded(hi) - value;
  uint16_t pick;
  if (d_lo < d_hi) {
    pick = lo;
  } else if (d_hi < d_lo) {
    pick = hi;
  } else {
    pick = (lo & 1u) ? hi : lo;
  }
  return static_cast<uint16_t>(sign | pick);
}

// ---------------------------------------------------------------------------------------------
// binary16 -> binary32

TEST(DtypeFp16, ToFp32MatchesF16CForAllBitPatterns) {
  QS_SKIP_WITHOUT_F16C();
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float expected = hw_fp16_to_fp32(h);
    const float got = fp16_to_fp32(h);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << "h=0x" << std::hex << i;
      ASSERT_EQ(bits_of(got) >> 31, bits_of(expected) >> 31) << "NaN sign, h=0x" << std::hex << i;
    } else {
      ASSERT_EQ(bits_of(got), bits_of(expected)) << "h=0x" << std::hex << i;
    }
  }
}

TEST(DtypeFp16, ToFp32SpecValues) {
  EXPECT_EQ(bits_of(fp16_to_fp32(0x0000)), 0x00000000u);  // +0
  EXPECT_EQ(bits_of(fp16_to_fp32(0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);                   // largest finite
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));      // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));      // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x03ff), std::ldexp(1023.0f, -24));   // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7c01)));  // signalling pattern is still a NaN
}

// ---------------------------------------------------------------------------------------------
// binary32 -> binary16

void expect_fp32_to_fp16_matches_hw(float x) {
  const uint16_t expected = hw_fp32_to_fp16(x);
  const uint16_t got = fp32_to_fp16(x);
  if (half_is_nan(expected)) {
    ASSERT_TRUE(half_is_nan(got)) << "x bits 0x" << std::hex << bits_of(x) << " got 0x" << got;
    ASSERT_EQ(got & 0x8000u, expected & 0x8000u) << "NaN sign, x bits 0x" << std::hex << bits_of(x);
  } else {
    ASSERT_EQ(got, expected) << "x=" << x << " bits 0x" << std::hex << bits_of(x);
  }
}

TEST(DtypeFp16, FromFp32MatchesF16COnRandomBitPatterns) {
  QS_SKIP_WITHOUT_F16C();
  // Uniform over all 2^32 patterns: every exponent (incl. inf/NaN/subnormal f32) equally likely.
  std::mt19937 rng(1234);
  for (int i = 0; i < 500000; ++i) {
    expect_fp32_to_fp16_matches_hw(float_of(rng()));
    if (HasFatalFailure()) return;
  }
}

TEST(DtypeFp16, FromFp32MatchesF16COnRandomFloatsInHalfRange) {
  QS_SKIP_WITHOUT_F16C();
  // Exponents concentrated where binary16 is finite, subnormal or just underflows/overflows.
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> exponent(-27, 17);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffffu);
  for (int i = 0; i < 500000; ++i) {
    const uint32_t sign = (rng() & 1u) << 31;
    const uint32_t bits = sign | static_cast<uint32_t>(exponent(rng) + 127) << 23 | mantissa(rng);
    expect_fp32_to_fp16_matches_hw(float_of(bits));
    if (HasFatalFailure()) return;
  }
}

TEST(DtypeFp16, FromFp32MatchesF16CAtEveryHalfwayPoint) {
  QS_SKIP_WITHOUT_F16C();
  // For each pair of consecutive finite binary16 values (and from 65504 to the overflow
  // threshold), the exact midpoint and its f32 neighbours: every rounding decision boundary.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const double lo = decode_half(static_cast<uint16_t>(h));
    const double hi = h == 0x7bffu ? 65536.0 : decode_half(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: 12 significant bits
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    for (float sign : {1.0f, -1.0f}) {
      const float m = sign * mid;
      expect_fp32_to_fp16_matches_hw(m);
      expect_fp32_to_fp16_matches_hw(std::nextafter(m, 0.0f));
      expect_fp32_to_fp16_matches_hw(std::nextafter(m, sign * 1e30f));
      expect_fp32_to_fp16_matches_hw(sign * static_cast<float>(lo));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(DtypeFp16, FromFp32EdgeCasesBySpec) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    float x;
    uint16_t expected;
  };
  const Case cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},                               // max half
      {65519.0f, 0x7bff},                               // below the 65520 midpoint
      {std::nextafter(65520.0f, 0.0f), 0x7bff},
      {65520.0f, 0x7c00},                               // midpoint, 0x7bff odd -> rounds up to inf
      {65536.0f, 0x7c00},
      {1e10f, 0x7c00},
      {std::numeric_limits<float>::max(), 0x7c00},
      {-1e10f, 0xfc00},
      {inf, 0x7c00},
      {-inf, 0xfc00},
      {std::ldexp(1.0f, -14), 0x0400},                  // smallest normal
      {std::ldexp(1.0f, -24), 0x0001},                  // smallest subnormal
      {-std::ldexp(1.0f, -24), 0x8001},
      {std::ldexp(1.0f, -25), 0x0000},                  // tie between 0 and 2^-24 -> even (0)
      {std::nextafter(std::ldexp(1.0f, -25), 1.0f), 0x0001},
      {std::ldexp(1.0f, -26), 0x0000},
      {std::ldexp(3.0f, -25), 0x0002},                  // tie 1|2 subnormal ulps -> 2
      {std::ldexp(5.0f, -25), 0x0002},                  // tie 2|3 -> 2
      {std::ldexp(7.0f, -25), 0x0004},                  // tie 3|4 -> 4
      {std::ldexp(1023.0f, -24), 0x03ff},               // largest subnormal
      {std::ldexp(2047.0f, -25), 0x0400},               // tie 0x3ff|0x400 -> 0x400 (normal)
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},           // tie, 0x3c00 even
      {1.0f + std::ldexp(3.0f, -11), 0x3c02},           // tie, 0x3c01 odd -> 0x3c02
      {std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f), 0x3c01},
      {2048.0f + 1.0f, 0x6800},                         // 2049: tie between 2048 and 2050 -> 2048
      {2048.0f + 3.0f, 0x6802},                         // 2051: tie 2050|2052 -> 2052
      {0.1f, 0x2e66},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(fp32_to_fp16(c.x), c.expected) << "x=" << c.x << " bits 0x" << std::hex << bits_of(c.x);
    if (cpu_has_f16c()) {
      EXPECT_EQ(hw_fp32_to_fp16(c.x), c.expected) << "(hardware) x=" << c.x;
    }
  }
  for (uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0xff800001u,
                            0x7f802000u, 0x7fa00000u}) {
    const uint16_t h = fp32_to_fp16(float_of(nan_bits));
    EXPECT_TRUE(half_is_nan(h)) << "NaN bits 0x" << std::hex << nan_bits << " -> 0x" << h;
    EXPECT_EQ(h & 0x8000u, (nan_bits >> 16) & 0x8000u);
  }
}

TEST(DtypeFp16, RoundTripsEveryHalf) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    if (half_is_nan(h)) {
      EXPECT_TRUE(half_is_nan(fp32_to_fp16(fp16_to_fp32(h))));
    } else {
      ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(h)), h) << std::hex << i;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// bfloat16

TEST(DtypeBf16, ToFp32MatchesDefinitionForAllBitPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const double expected = decode_bf16(b);
    const float got = bf16_to_fp32(b);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << std::hex << i;
      ASSERT_EQ(std::signbit(got), (i & 0x8000u) != 0) << std::hex << i;
    }
  }
}

TEST(DtypeBf16, RoundTripsEveryBf16) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const uint16_t back = fp32_to_bf16(bf16_to_fp32(b));
    if ((b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0) {
      EXPECT_EQ(back & 0x7f80u, 0x7f80u) << std::hex << i;
      EXPECT_NE(back & 0x7fu, 0u) << "NaN must stay NaN, 0x" << std::hex << i;
    } else {
      ASSERT_EQ(back, b) << std::hex << i;
    }
  }
}

TEST(DtypeBf16, RoundsToNearestEvenOnCraftedPatterns) {
  struct Case {
    uint32_t f32;
    uint16_t expected;
  };
  // Expected bits worked out by hand: keep the upper 16 bits, add one when the dropped 16 bits
  // exceed 0x8000, or equal 0x8000 and the kept part is odd.
  const Case cases[] = {
      {0x3f800000u, 0x3f80},  // 1.0 exact
      {0x3f807fffu, 0x3f80},  // just below half an ulp
      {0x3f808000u, 0x3f80},  // tie, 0x3f80 even -> stays
      {0x3f808001u, 0x3f81},  // just above half
      {0x3f818000u, 0x3f82},  // tie, 0x3f81 odd -> up to even
      {0x3f81ffffu, 0x3f82},
      {0xbf808000u, 0xbf80},  // negative tie, even -> stays
      {0xbf818000u, 0xbf82},  // negative tie, odd -> away from zero (to even)
      {0x3fff8000u, 0x4000},  // tie with carry into the exponent: 0x3fff odd -> 0x4000
      {0x7f7f7fffu, 0x7f7f},  // largest bf16, below the midpoint
      {0x7f7f8000u, 0x7f80},  // midpoint above max bf16, 0x7f7f odd -> +inf
      {0x7f7fffffu, 0x7f80},  // FLT_MAX -> +inf
      {0xff7fffffu, 0xff80},  // -FLT_MAX -> -inf
      {0x7f800000u, 0x7f80},  // +inf
      {0xff800000u, 0xff80},  // -inf
      {0x00000000u, 0x0000},
      {0x80000000u, 0x8000},  // -0
      {0x00008000u, 0x0000},  // subnormal tie, even -> 0
      {0x00018000u, 0x0002},  // subnormal tie, odd -> 2
      {0x00008001u, 0x0001},
      {0x007fffffu, 0x0080},  // largest f32 subnormal -> smallest normal bf16
      {0x3dcccccdu, 0x3dcd},  // 0.1f: dropped 0xcccd > 0x8000
  };
  for (const Case& c : cases) {
    EXPECT_EQ(fp32_to_bf16(float_of(c.f32)), c.expected) << "f32 bits 0x" << std::hex << c.f32;
    EXPECT_EQ(reference_fp32_to_bf16(float_of(c.f32)), c.expected)
        << "(test reference) f32 bits 0x" << std::hex << c.f32;
  }
  for (uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu,
                            0xff800001u}) {
    const uint16_t b = fp32_to_bf16(float_of(nan_bits));
    EXPECT_TRUE(std::isnan(bf16_to_fp32(b))) << "NaN bits 0x" << std::hex << nan_bits << " -> 0x" << b;
    EXPECT_EQ(b & 0x8000u, (nan_bits >> 16) & 0x8000u);
  }
}

TEST(DtypeBf16, MatchesNearestEvenReferenceOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300000; ++i) {
    uint32_t bits = rng();
    if (i % 4 == 0) bits = (bits & 0xffff0000u) | 0x8000u;  // force ties
    const float x = float_of(bits);
    if (std::isnan(x)) continue;
    ASSERT_EQ(fp32_to_bf16(x), reference_fp32_to_bf16(x)) << "bits 0x" << std::hex << bits;
  }
}

// ---------------------------------------------------------------------------------------------
// Layout

TEST(DtypeLayout, GgmlIdsFromGgufSpec) {
  struct Known {
    uint32_t id;
    DType dtype;
    const char* name;
    size_t block_size;
    size_t block_bytes;
  };
  // ggml block layouts: Q4_0 = f16 d + 16 bytes of nibbles; Q8_0 = f16 d + 32 int8;
  // Q4_K = 2 f16 + 12 scale bytes + 128 nibble bytes; Q5_K = Q4_K + 32 high-bit bytes;
  // Q6_K = 128 low bytes + 64 high bytes + 16 int8 scales + f16 d.
  const Known known[] = {
      {0, DType::F32, "F32", 1, 4},
      {1, DType::F16, "F16", 1, 2},
      {2, DType::Q4_0, "Q4_0", 32, 2 + 16},
      {8, DType::Q8_0, "Q8_0", 32, 2 + 32},
      {12, DType::Q4_K, "Q4_K", 256, 4 + 12 + 128},
      {13, DType::Q5_K, "Q5_K", 256, 4 + 12 + 32 + 128},
      {14, DType::Q6_K, "Q6_K", 256, 128 + 64 + 16 + 2},
      {30, DType::BF16, "BF16", 1, 2},
  };
  for (const Known& k : known) {
    const auto info = dtype_info_from_ggml_id(k.id);
    ASSERT_TRUE(info.has_value()) << "ggml id " << k.id;
    EXPECT_EQ(info->dtype, k.dtype);
    EXPECT_EQ(static_cast<uint32_t>(info->dtype), k.id);
    EXPECT_EQ(info->name, k.name);
    EXPECT_EQ(info->block_size, k.block_size) << k.name;
    EXPECT_EQ(info->block_bytes, k.block_bytes) << k.name;
    EXPECT_EQ(dtype_name(k.dtype), k.name);
    EXPECT_EQ(dtype_info(k.dtype).block_bytes, k.block_bytes);
  }
  // Q4_1 3, Q5_0 6, Q5_1 7, Q8_1 9, Q2_K 10, Q3_K 11, Q8_K 15, IQ* 16.., I8 24, F64 28, ...
  for (uint32_t id : {3u, 4u, 5u, 6u, 7u, 9u, 10u, 11u, 15u, 16u, 20u, 24u, 28u, 29u, 31u, 39u, 1000u,
                      0xffffffffu}) {
    EXPECT_FALSE(dtype_info_from_ggml_id(id).has_value()) << "ggml id " << id;
  }
  EXPECT_THROW(dtype_info(static_cast<DType>(3)), Error);
}

TEST(DtypeLayout, RowBytes) {
  EXPECT_EQ(row_bytes(DType::F32, 0), 0u);
  EXPECT_EQ(row_bytes(DType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(DType::F16, 7), 14u);
  EXPECT_EQ(row_bytes(DType::BF16, 7), 14u);
  EXPECT_EQ(row_bytes(DType::F32, 4096), 16384u);
  EXPECT_EQ(row_bytes(DType::Q4_0, 32), 18u);
  EXPECT_EQ(row_bytes(DType::Q4_0, 4096), 128u * 18u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 32), 34u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 96), 102u);
  EXPECT_EQ(row_bytes(DType::Q4_K, 256), 144u);
  EXPECT_EQ(row_bytes(DType::Q4_K, 4096), 16u * 144u);
  EXPECT_EQ(row_bytes(DType::Q5_K, 512), 352u);
  EXPECT_EQ(row_bytes(DType::Q6_K, 768), 630u);

  EXPECT_THROW(row_bytes(DType::Q8_0, 33), Error);
  EXPECT_THROW(row_bytes(DType::Q8_0, 31), Error);
  EXPECT_THROW(row_bytes(DType::Q4_0, 16), Error);
  EXPECT_THROW(row_bytes(DType::Q4_K, 255), Error);
  EXPECT_THROW(row_bytes(DType::Q5_K, 257), Error);
  EXPECT_THROW(row_bytes(DType::Q6_K, 128), Error);
  EXPECT_THROW(row_bytes(DType::F32, -1), Error);
  try {
    row_bytes(DType::Q8_0, 33);
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("33"), std::string::npos) << message;
    EXPECT_NE(message.find("Q8_0"), std::string::npos) << message;
  }
}

// ---------------------------------------------------------------------------------------------
// dequantize_row

TEST(DtypeDequantize, F32IsExactCopy) {
  std::mt19937 rng(1);
  std::vector<float> src(37);
  for (float& v : src) v = float_of(rng() & 0xbfffffffu);  // finite, both signs
  std::vector<float> dst(src.size(), -1.0f);
  dequantize_row(DType::F32, src.data(), dst.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) EXPECT_EQ(bits_of(dst[i]), bits_of(src[i]));
}

TEST(DtypeDequantize, F16AllPatternsAndEveryTailLength) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  // Row lengths 1..17 at byte offsets that defeat alignment exercise the vector body and the tail.
  for (int64_t offset : {int64_t{0}, int64_t{1}, int64_t{3}}) {
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{8}, int64_t{9}, int64_t{15},
                      int64_t{16}, int64_t{17}, int64_t{65536} - offset}) {
      std::vector<float> dst(static_cast<size_t>(n));
      dequantize_row(DType::F16, all.data() + offset, dst.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = all[static_cast<size_t>(offset + i)];
        const double expected = decode_half(h);
        if (std::isnan(expected)) {
          ASSERT_TRUE(std::isnan(dst[i])) << std::hex << h;
        } else {
          ASSERT_EQ(static_cast<double>(dst[i]), expected) << "h=0x" << std::hex << h;
          ASSERT_EQ(std::signbit(dst[i]), (h & 0x8000u) != 0) << "h=0x" << std::hex << h;
        }
      }
    }
  }
}

TEST(DtypeDequantize, Bf16MatchesDefinition) {
  std::mt19937 rng(2);
  std::vector<uint16_t> src(1001);
  for (auto& b : src) {
    do {
      b = static_cast<uint16_t>(rng());
    } while ((b & 0x7f80u) == 0x7f80u);  // finite only
  }
  std::vector<float> dst(src.size());
  // Unaligned source (odd uint16 index) as found in packed files.
  dequantize_row(DType::BF16, src.data() + 1, dst.data(), static_cast<int64_t>(src.size()) - 1);
  for (size_t i = 0; i + 1 < src.size(); ++i) {
    ASSERT_EQ(static_cast<double>(dst[i]), decode_bf16(src[i + 1])) << i;
  }
}

TEST(DtypeDequantize, Q8_0MatchesSpecDecode) {
  QS_SKIP_WITHOUT_F16C();
  // GGUF/ggml block_q8_0: little-endian f16 scale d, then 32 int8 quants; x = d * q.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  std::uniform_int_distribution<int> quant(-128, 127);
  const int n_blocks = 9;
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks) * 34 + 1);
  std::vector<double> expected;
  uint8_t* base = bytes.data() + 1;  // unaligned row start
  for (int b = 0; b < n_blocks; ++b) {
    uint16_t d = hw_fp32_to_fp16(scale(rng));
    if (b == 1) d = 0x0001;  // subnormal scale
    if (b == 2) d = 0x7bff;  // 65504
    if (b == 3) d = 0x8000;  // -0
    base[b * 34 + 0] = static_cast<uint8_t>(d & 0xff);
    base[b * 34 + 1] = static_cast<uint8_t>(d >> 8);
    for (int i = 0; i < 32; ++i) {
      int q = quant(rng);
      if (i == 0) q = -128;
      if (i == 1) q = 127;
      base[b * 34 + 2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      expected.push_back(decode_half(d) * q);
    }
  }
  std::vector<float> dst(static_cast<size_t>(n_blocks) * 32);
  dequantize_row(DType::Q8_0, base, dst.data(), n_blocks * 32);
  for (size_t i = 0; i < dst.size(); ++i) {
    // d * q is exact in double; the f32 result must be that value correctly rounded.
    ASSERT_EQ(dst[i], static_cast<float>(expected[i])) << "element " << i;
  }
}

TEST(DtypeDequantize, UnknownTypesThrow) {
  std::vector<uint8_t> bytes(1024);
  std::vector<float> dst(256);
  EXPECT_THROW(dequantize_row(static_cast<DType>(99), bytes.data(), dst.data(), 32), Error);
}

}  // namespace
}  // namespace qs
