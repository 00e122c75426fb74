// The AVX-512 VNNI matmul level (dot_avx512_vnni.cc): Q8_0 and Q6_K row and tile dots (Q4_K: the AVX2 source
// compiled with this level's flags, dot_avx2_evex_avx512_vnni.cc)
// against a float64 dot of the decoded operands, bit-identity across every (rows, tokens) tiling
// and against the AVX2 level (the design keeps the same exact int32 block totals and the same
// float sequence), over a sweep of lengths. Skipped, with the reason, on CPUs without AVX-512 VNNI.
// (kernels_quant_test.cc runs its every-level tests on this table too.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/cpu_isa.h"
#include "backend/cpu/kernels/dot_kernels.h"
#include "formats/dtype.h"
#include "support/vnni_kernels.h"
#include "formats/quantize.h"

namespace qs {
namespace {

using kernels::CpuIsa;
using kernels::DotKernels;

constexpr double kEpsF32 = 0x1p-23;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Weights [rows, n] quantized from random normals (every third row one-signed, which exercises
// the K-quant mins), activations [tokens, n] in the type's activation format, and both decoded.
struct Problem {
  size_t w_stride = 0, a_stride = 0;
  std::vector<uint8_t> w, a;
  std::vector<double> wv, av, w_max;
};

Problem make_problem(DType dtype, int64_t rows, int64_t tokens, int64_t n, std::mt19937& rng) {
  Problem p;
  std::normal_distribution<float> dist(0.0f, 0.5f);
  p.w_stride = row_bytes(dtype, n);
  p.w.resize(p.w_stride * rows);
  std::vector<float> x(n), decoded(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = r % 3 == 2 ? std::fabs(dist(rng)) + 0.25f : dist(rng);
    quantize_row(dtype, x.data(), p.w.data() + r * p.w_stride, n);
    dequantize_row(dtype, p.w.data() + r * p.w_stride, decoded.data(), n);
    double m = 0;
    for (float v : decoded) {
      p.wv.push_back(v);
      m = std::max(m, std::fabs(static_cast<double>(v)));
    }
    p.w_max.push_back(m);
  }
  const auto format = kernels::activation_format(dtype);
  p.a_stride = kernels::activation_row_bytes(format, n);
  p.a.resize(p.a_stride * tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    for (float& v : x) v = 2.0f * dist(rng);
    uint8_t* row = p.a.data() + t * p.a_stride;
    if (format == kernels::ActivationFormat::kQ8_0A) {
      auto* blocks = reinterpret_cast<BlockQ8_0A*>(row);
      quantize_row_q8_0a(x.data(), blocks, n);
      for (int64_t i = 0; i < n; ++i) p.av.push_back(static_cast<double>(blocks[i / 32].d) * blocks[i / 32].qs[i % 32]);
    } else {
      auto* blocks = reinterpret_cast<BlockQ8_K*>(row);
      quantize_row_q8_k(x.data(), blocks, n);
      for (int64_t i = 0; i < n; ++i) p.av.push_back(static_cast<double>(blocks[i / 256].d) * blocks[i / 256].qs[i % 256]);
    }
  }
  return p;
}

// |kernel - float64 dot| bound: f32 roundings of the per-block steps times the magnitude (K-quants:
// plus the min offsets, up to 2 * max|w| per element), as in kernels_quant_test.cc.
void reference(DType dtype, const Problem& p, int64_t r, int64_t t, int64_t n, double* value, double* tol) {
  const bool k_quant = dtype_info(dtype).block_size == 256;
  double sum = 0, magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = p.wv[r * n + i], a = p.av[t * n + i];
    sum += w * a;
    magnitude += (std::fabs(w) + (k_quant ? 2 * p.w_max[r] : 0.0)) * std::fabs(a);
  }
  const double ops = static_cast<double>(n / static_cast<int64_t>(dtype_info(dtype).block_size)) + 8;
  *value = sum;
  *tol = (ops + 8) * 2 * kEpsF32 * magnitude + 1e-30;
}

const DotKernels* vnni_or_skip_reason(std::string* reason) { return test::vnni_kernels_or_skip_reason(reason); }

TEST(KernelVnni, TableIsTheVnniLevelWithItsOwnDecodeKernels) {
  std::string reason;
  const DotKernels* k = vnni_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  const DotKernels* avx2 = kernels::dot_kernels_for(CpuIsa::kAvx2);
  ASSERT_NE(avx2, nullptr);
  EXPECT_EQ(k->isa, CpuIsa::kAvx512Vnni);
  for (DType dtype : {DType::Q8_0, DType::Q6_K}) {
    ASSERT_NE(k->tile_dot(dtype), nullptr) << dtype_name(dtype);
    EXPECT_NE(k->tile_dot(dtype), avx2->tile_dot(dtype)) << dtype_name(dtype);
    EXPECT_NE(k->row_dot(dtype), avx2->row_dot(dtype)) << dtype_name(dtype);
  }
  // Q4_K / Q5_K decode: the AVX2 source compiled with this level's flags, not the AVX2 object's copy.
  for (DType dtype : {DType::Q4_K, DType::Q5_K}) {
    EXPECT_NE(k->row_dot(dtype), avx2->row_dot(dtype)) << dtype_name(dtype);
  }
}

TEST(KernelVnni, TilesMatchFloat64AndAreBitIdenticalAcrossTilingsAndToAvx2) {
  std::string reason;
  const DotKernels* k = vnni_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  const DotKernels* avx2 = kernels::dot_kernels_for(CpuIsa::kAvx2);
  ASSERT_NE(avx2, nullptr);
  std::mt19937 rng(1401);
  const int64_t rows = 9, tokens = 9;
  for (DType dtype : {DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const int64_t block = static_cast<int64_t>(dtype_info(dtype).block_size);
    const std::vector<int64_t> lengths = block == 32 ? std::vector<int64_t>{32, 64, 96, 128, 256, 288, 1024, 2560}
                                                     : std::vector<int64_t>{256, 512, 768, 1024, 1280, 2560};
    for (int64_t n : lengths) {
      const Problem p = make_problem(dtype, rows, tokens, n, rng);
      // Singles: one row, one token, through the row dot.
      std::vector<float> single(tokens * rows);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          float y = NAN;
          k->row_dot(dtype)(n, p.w.data() + r * p.w_stride, p.a.data() + t * p.a_stride, p.a_stride, 1, &y);
          double ref, tol;
          reference(dtype, p, r, t, n, &ref, &tol);
          ASSERT_LE(std::fabs(y - ref), tol) << dtype_name(dtype) << " n=" << n << " row " << r << " token " << t;
          float y_avx2 = NAN;
          avx2->row_dot(dtype)(n, p.w.data() + r * p.w_stride, p.a.data() + t * p.a_stride, p.a_stride, 1, &y_avx2);
          ASSERT_EQ(bits_of(y), bits_of(y_avx2)) << dtype_name(dtype) << " n=" << n << " row " << r << " token " << t;
          single[t * rows + r] = y;
        }
      }
      // Every tile shape (rows x tokens) gives the singles bit for bit, through the tile and the row dot.
      for (int n_rows = 1; n_rows <= rows; ++n_rows) {
        for (int n_act = 1; n_act <= tokens; ++n_act) {
          std::vector<float> y(n_act * rows, NAN);
          k->tile_dot(dtype)(n, p.w.data(), p.w_stride, n_rows, p.a.data(), p.a_stride, n_act, y.data(), rows);
          for (int t = 0; t < n_act; ++t) {
            for (int r = 0; r < n_rows; ++r) {
              ASSERT_EQ(bits_of(y[t * rows + r]), bits_of(single[t * rows + r]))
                  << dtype_name(dtype) << " n=" << n << " tile " << n_rows << "x" << n_act << " row " << r << " token " << t;
            }
          }
        }
        std::vector<float> group(tokens, NAN);
        k->row_dot(dtype)(n, p.w.data() + (n_rows - 1) * p.w_stride, p.a.data(), p.a_stride, tokens, group.data());
        for (int t = 0; t < tokens; ++t) {
          ASSERT_EQ(bits_of(group[t]), bits_of(single[t * rows + n_rows - 1])) << dtype_name(dtype) << " n=" << n;
        }
      }
    }
  }
}

TEST(KernelVnni, Q8_0ExtremeLevelsAreExact) {
  // vpdpbusd multiplies w + 128 (0..255) by the activation and subtracts 128 * sum(a): weights of
  // -128 / 127 against activations of -127 / 127 are the extremes. With d = 1 every product and
  // sum is an integer well below 2^24, so the f32 result must equal the integer dot exactly.
  std::string reason;
  const DotKernels* k = vnni_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  const int64_t n = 128, rows = 5;
  const int8_t levels[] = {-128, 127, -127, 0, 1};
  std::vector<BlockQ8_0> w(rows * n / 32);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < n / 32; ++b) {
      BlockQ8_0& blk = w[r * (n / 32) + b];
      blk.d = fp32_to_fp16(1.0f);
      for (int i = 0; i < 32; ++i) blk.qs[i] = r < 2 ? levels[r] : levels[(i + b + r) % 5];
    }
  }
  std::vector<BlockQ8_0A> a(n / 32);
  for (int64_t b = 0; b < n / 32; ++b) {
    a[b].d = 1.0f;
    for (int i = 0; i < 32; ++i) a[b].qs[i] = static_cast<int8_t>((i + b) % 3 == 0 ? -127 : 127);
  }
  std::vector<float> y(rows, NAN);
  k->q8_0_tile(n, w.data(), (n / 32) * sizeof(BlockQ8_0), rows, a.data(), 0, 1, y.data(), 1);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += int64_t{w[r * (n / 32) + i / 32].qs[i % 32]} * a[i / 32].qs[i % 32];
    EXPECT_EQ(y[r], static_cast<float>(dot)) << "row " << r;
  }
}

}  // namespace
}  // namespace qs
