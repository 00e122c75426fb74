// Quantized block types: the scalar reference decode against a float64 decoder written here from
// the GGUF / ggml block layout (byte offsets, not our structs), and quantize -> dequantize error
// bounds derived from each written block's own quantization step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "core/error.h"
#include "formats/quantize.h"

namespace qs {
namespace {

// binary16 from its fields (bias 15, 10 fraction bits); finite values only.
double half_value(const uint8_t* p) {
  const unsigned h = p[0] | (p[1] << 8);
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// 6-bit scale and min of sub-block j (GGUF K-quant "scales[12]" packing).
void k4_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

struct Decoded {
  double value;
  double step;  // distance between adjacent levels at this element
};

// Element i of one block of `dtype` starting at `b`, from the spec.
Decoded spec_decode(DType dtype, const uint8_t* b, int i) {
  switch (dtype) {
    case DType::Q8_0: {
      const double d = half_value(b);
      return {d * static_cast<int8_t>(b[2 + i]), std::fabs(d)};
    }
    case DType::Q4_0: {
      const double d = half_value(b);
      const int q = i < 16 ? (b[2 + i] & 15) : (b[2 + i - 16] >> 4);
      return {d * (q - 8), std::fabs(d)};
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool q5 = dtype == DType::Q5_K;
      const double d = half_value(b), dmin = half_value(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* qh = b + 16;
      const uint8_t* qs = q5 ? b + 48 : b + 16;
      const int c = i / 64, l = i % 32, upper = (i % 64) >= 32;
      int q = upper ? (qs[32 * c + l] >> 4) : (qs[32 * c + l] & 15);
      if (q5) q |= ((qh[l] >> (2 * c + upper)) & 1) << 4;
      int sc, m;
      k4_scale_min(scales, i / 32, &sc, &m);
      return {d * sc * q - dmin * m, std::fabs(d * sc)};
    }
    case DType::Q6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
      const double d = half_value(b + 208);
      const int h = i / 128, g = (i % 128) / 32, l = i % 32;
      const uint8_t low_byte = ql[64 * h + l + (g & 1) * 32];
      const int low = g < 2 ? (low_byte & 15) : (low_byte >> 4);
      const int high = (qh[32 * h + l] >> (2 * g)) & 3;
      return {d * scales[i / 16] * ((low | (high << 4)) - 32), std::fabs(d * scales[i / 16])};
    }
    default:
      ADD_FAILURE() << "no spec decoder";
      return {0, 0};
  }
}

constexpr DType kBlockTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Random block bytes with every f16 field set to a finite value of moderate size.
std::vector<uint8_t> random_blocks(DType dtype, int64_t n_blocks, std::mt19937& rng) {
  const DTypeInfo& info = dtype_info(dtype);
  std::vector<uint8_t> bytes(n_blocks * info.block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& v : bytes) v = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (int64_t k = 0; k < n_blocks; ++k) {
    uint8_t* b = bytes.data() + k * info.block_bytes;
    std::vector<size_t> half_offsets;
    if (dtype == DType::Q8_0 || dtype == DType::Q4_0) half_offsets = {0};
    if (dtype == DType::Q4_K || dtype == DType::Q5_K) half_offsets = {0, 2};
    if (dtype == DType::Q6_K) half_offsets = {208};
    for (size_t off : half_offsets) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      std::memcpy(b + off, &h, 2);
    }
  }
  return bytes;
}

TEST(QuantDequantize, ReferenceMatchesSpecDecode) {
  std::mt19937 rng(101);
  for (DType dtype : kBlockTypes) {
    const DTypeInfo& info = dtype_info(dtype);
    const int64_t n_blocks = 7;
    const std::vector<uint8_t> bytes = random_blocks(dtype, n_blocks, rng);
    const int64_t n = n_blocks * static_cast<int64_t>(info.block_size);
    std::vector<float> out(n);
    dequantize_row(dtype, bytes.data(), out.data(), n);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t blk = k / info.block_size;
      const Decoded e =
          spec_decode(dtype, bytes.data() + blk * info.block_bytes, static_cast<int>(k % info.block_size));
      // Q8_0, Q4_0 and Q6_K decode with one f32 rounding of an exact product; Q4_K / Q5_K round
      // the scale products and the difference (a few units of the magnitudes involved).
      const double tol = (dtype == DType::Q4_K || dtype == DType::Q5_K)
                             ? 4 * 0x1p-24 * (std::fabs(e.value) + 64 * e.step + 64 * 0.05 * 64)
                             : 0x1p-24 * std::fabs(e.value);
      ASSERT_LE(std::fabs(out[k] - e.value), tol) << info.name << " element " << k;
    }
  }
}

TEST(QuantDequantize, RejectsPartialBlocks) {
  std::vector<uint8_t> bytes(1024);
  std::vector<float> dst(512);
  EXPECT_THROW(dequantize_row(DType::Q4_0, bytes.data(), dst.data(), 33), Error);
  EXPECT_THROW(dequantize_row(DType::Q6_K, bytes.data(), dst.data(), 128), Error);
  std::vector<float> src(512, 1.0f);
  EXPECT_THROW(quantize_row(DType::Q4_K, src.data(), bytes.data(), 255), Error);
}

std::vector<float> test_row(int64_t n, std::mt19937& rng, int pattern) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (pattern) {
      case 0: x[i] = normal(rng); break;                              // weights-like
      case 1: x[i] = std::fabs(normal(rng)) + 0.5f; break;             // all positive
      case 2: x[i] = -std::fabs(normal(rng)) * 3.0f - 1.0f; break;     // all negative
      case 3: x[i] = (i % 97 == 0) ? 40.0f * normal(rng) : 0.01f * normal(rng); break;  // outliers
      default: x[i] = (i % 64 < 32) ? 0.0f : normal(rng); break;      // zero sub-blocks
    }
  }
  return x;
}

TEST(QuantRoundTrip, ErrorWithinHalfStepOfEachBlock) {
  std::mt19937 rng(202);
  for (DType dtype : kBlockTypes) {
    const DTypeInfo& info = dtype_info(dtype);
    for (int pattern = 0; pattern < 5; ++pattern) {
      const int64_t n = 4 * static_cast<int64_t>(info.block_size);
      const std::vector<float> x = test_row(n, rng, pattern);
      std::vector<uint8_t> bytes(row_bytes(dtype, n));
      quantize_row(dtype, x.data(), bytes.data(), n);
      std::vector<float> y(n);
      dequantize_row(dtype, bytes.data(), y.data(), n);
      double err2 = 0, range2 = 0;
      for (int64_t k = 0; k < n; ++k) {
        const uint8_t* b = bytes.data() + (k / info.block_size) * info.block_bytes;
        const Decoded e = spec_decode(dtype, b, static_cast<int>(k % info.block_size));
        double bound = 0.5 * e.step;
        // Q4_0: inputs on the side without the -8 level may sit up to one step from level 7.
        if (dtype == DType::Q4_0 && x[k] / half_value(b) > 7.5) bound = e.step;
        bound = bound * (1 + 1e-5) + 1e-6 * std::fabs(x[k]) + 1e-30;
        ASSERT_LE(std::fabs(static_cast<double>(y[k]) - x[k]), bound)
            << info.name << " pattern " << pattern << " element " << k << " x=" << x[k];
        err2 += (y[k] - x[k]) * (y[k] - x[k]);
        range2 += static_cast<double>(x[k]) * x[k];
      }
      // Sanity on the step itself: the relative RMS error is that of a 2^bits-level quantizer.
      const double bits = dtype == DType::Q8_0 ? 8 : dtype == DType::Q6_K ? 6 : dtype == DType::Q5_K ? 5 : 4;
      if (pattern == 0) {
        EXPECT_LT(std::sqrt(err2 / range2), 3.0 * std::pow(2.0, -bits) * 2.0) << info.name;
      }
    }
  }
}

TEST(QuantRoundTrip, ZerosStayZeros) {
  for (DType dtype : kBlockTypes) {
    const int64_t n = 256;
    std::vector<float> x(n, 0.0f), y(n, 1.0f);
    std::vector<uint8_t> bytes(row_bytes(dtype, n));
    quantize_row(dtype, x.data(), bytes.data(), n);
    dequantize_row(dtype, bytes.data(), y.data(), n);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(dtype);
  }
}

TEST(QuantRoundTrip, FloatTypesRoundToNearest) {
  std::mt19937 rng(203);
  const std::vector<float> x = test_row(37, rng, 0);
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    std::vector<uint8_t> bytes(row_bytes(dtype, 37));
    quantize_row(dtype, x.data(), bytes.data(), 37);
    std::vector<float> y(37);
    dequantize_row(dtype, bytes.data(), y.data(), 37);
    const double u = dtype == DType::F32 ? 0 : dtype == DType::F16 ? 0x1p-11 : 0x1p-8;
    for (int i = 0; i < 37; ++i) {
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), u * std::fabs(x[i]) + 1e-7) << dtype_name(dtype);
    }
  }
}

TEST(QuantActivations, Q8_0AAndQ8_KWithinHalfStepWithExactSums) {
  std::mt19937 rng(204);
  for (int pattern = 0; pattern < 5; ++pattern) {
    const std::vector<float> x = test_row(512, rng, pattern);
    std::vector<BlockQ8_0A> a(512 / 32);
    quantize_row_q8_0a(x.data(), a.data(), 512);
    std::vector<BlockQ8_K> k(2);
    quantize_row_q8_k(x.data(), k.data(), 512);
    for (int i = 0; i < 512; ++i) {
      const BlockQ8_0A& ba = a[i / 32];
      double amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[i / 32 * 32 + j])));
      ASSERT_NEAR(ba.d, amax / 127, 1e-6 * amax);
      ASSERT_LE(std::fabs(ba.d * static_cast<double>(ba.qs[i % 32]) - x[i]), 0.5 * ba.d * (1 + 1e-5) + 1e-30);
      const BlockQ8_K& bk = k[i / 256];
      ASSERT_LE(std::fabs(bk.d * static_cast<double>(bk.qs[i % 256]) - x[i]), 0.5 * bk.d * (1 + 1e-5) + 1e-30);
    }
    for (const BlockQ8_K& bk : k) {
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += bk.qs[16 * g + j];
        ASSERT_EQ(bk.bsums[g], sum);
      }
      for (int j = 0; j < 256; ++j) ASSERT_GE(bk.qs[j], -127);
    }
  }
}

TEST(QuantHalf, RoundUpNeverShrinks) {
  std::mt19937 rng(205);
  std::uniform_real_distribution<float> exp(-20.0f, 15.0f);
  for (int i = 0; i < 10000; ++i) {
    const float v = std::exp2(exp(rng));
    const uint16_t h = fp32_to_fp16_round_up(v);
    ASSERT_GE(half_value(reinterpret_cast<const uint8_t*>(&h)), v);
    if (h > 1) {
      const uint16_t below = static_cast<uint16_t>(h - 1);
      ASSERT_LT(half_value(reinterpret_cast<const uint8_t*>(&below)), v);
    }
  }
  EXPECT_EQ(fp32_to_fp16_round_up(0.0f), 0);
}

}  // namespace
}  // namespace qs

namespace qs {
namespace {

// The 6-bit scales/mins packing of Q4_K / Q5_K, decoded with the GGUF spec's per-sub-block rule
// (ggml get_scale_min_k4) written out here, against the all-at-once decoder the kernels use.
TEST(QuantKScales, AllAtOnceDecodeMatchesSpecRule) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 20000; ++trial) {
    uint8_t s[12];
    for (uint8_t& b : s) b = static_cast<uint8_t>(trial < 256 ? (trial * 0x9D + 0x3B * (&b - s)) & 0xFF : byte(rng));
    uint64_t sc8 = 0, m8 = 0;
    unpack_scales_mins_k4(s, &sc8, &m8);
    for (int j = 0; j < 8; ++j) {
      const int sc = j < 4 ? (s[j] & 63) : ((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
      const int m = j < 4 ? (s[j + 4] & 63) : ((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
      ASSERT_EQ(static_cast<int>((sc8 >> (8 * j)) & 0xFF), sc) << "trial " << trial << " j " << j;
      ASSERT_EQ(static_cast<int>((m8 >> (8 * j)) & 0xFF), m) << "trial " << trial << " j " << j;
    }
  }
}

}  // namespace
}  // namespace qs
