// Every dispatched element-wise, attention and conversion kernel on every ISA level this CPU runs
// (tables from *_kernels_for), against float64 references over a sweep of lengths and
// misalignments; plus the per-family path report. Levels the CPU lacks are skipped with a message.
// (Matmul's tables are covered the same way in kernels_quant_test.cc.)
//
// Tolerances are derived from the data with u = 2^-24, the binary32 unit roundoff.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels/cpu_isa.h"
#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/kernel_paths.h"
#include "backend/cpu/kernels/kv_layout.h"
#include "backend/cpu/kernels/norm_rope.h"
#include "backend/cpu/kernels/paged_attention.h"
#include "formats/dequantize_kernels.h"
#include "formats/dtype.h"
#include "formats/quantize.h"

namespace qs {
namespace {

using kernels::CpuIsa;

constexpr double kU = 0x1p-24;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng, float std_dev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, std_dev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The levels above scalar that a test should cover, with a note for each one the CPU lacks.
template <typename T>
std::vector<const T*> tables(const T* (*table_for)(CpuIsa)) {
  std::vector<const T*> out;
  for (int level = 0; level < kCpuIsaLevels; ++level) {
    const auto isa = static_cast<CpuIsa>(level);
    if (const T* t = table_for(isa)) {
      out.push_back(t);
    } else if (isa == CpuIsa::kAvx2 && !kernels::cpu_has_isa(isa)) {
      std::printf("[  NOTE    ] avx2 not tested: the CPU lacks AVX2/FMA/F16C\n");
    }
  }
  return out;
}

std::vector<int64_t> lengths() {
  std::vector<int64_t> n;
  for (int64_t i = 1; i <= 40; ++i) n.push_back(i);
  for (int64_t i : {63, 64, 65, 127, 128, 129, 1000, 2560, 4099}) n.push_back(i);
  return n;
}

TEST(KernelIsaLevels, AvxTwoPathIsPresentWhenTheCpuHasIt) {
  if (!kernels::cpu_has_isa(CpuIsa::kAvx2)) GTEST_SKIP() << "the CPU lacks AVX2/FMA/F16C";
#if defined(__x86_64__)
  EXPECT_NE(kernels::elementwise_kernels_for(CpuIsa::kAvx2), nullptr);
  EXPECT_NE(kernels::attention_kernels_for(CpuIsa::kAvx2), nullptr);
  EXPECT_NE(dequantize_kernels_for(CpuIsa::kAvx2), nullptr);
#endif
}

TEST(KernelIsaPaths, NamesTheActiveTableOfEveryFamily) {
  const std::string paths = kernels::cpu_kernel_paths();
  const auto name = [](CpuIsa isa) { return std::string(kernels::cpu_isa_name(isa)); };
  EXPECT_NE(paths.find("cpu=" + name(kernels::detected_cpu_isa())), std::string::npos) << paths;
  EXPECT_NE(paths.find("matmul=" + name(kernels::active_dot_kernels().isa)), std::string::npos) << paths;
  EXPECT_NE(paths.find("attention=" + name(kernels::active_attention_kernels().isa)), std::string::npos);
  EXPECT_NE(paths.find("norm=" + name(kernels::active_elementwise_kernels().isa)), std::string::npos);
  EXPECT_NE(paths.find("convert=" + name(active_dequantize_kernels().isa)), std::string::npos);
  const std::string families = paths.substr(paths.find(' '));  // after "cpu=<detected>"
  const char* env = std::getenv("QS_CPU_ISA");
  if (env != nullptr && std::string(env) == "scalar") {
    EXPECT_EQ(families.find("=avx"), std::string::npos) << "QS_CPU_ISA=scalar must force every family: " << paths;
  }
  if (env != nullptr && std::string(env) == "avx2" && kernels::cpu_has_isa(CpuIsa::kAvx2)) {
    EXPECT_EQ(families.find("=scalar"), std::string::npos) << paths;
  }
}

TEST(KernelIsaDot, EveryLevelMatchesFloat64AndDot4MatchesDotBitForBit) {
  std::mt19937 rng(71);
  const int64_t max_n = 4099;
  const std::vector<float> a = random_floats(max_n + 8, rng);
  const std::vector<float> w = random_floats(4 * (max_n + 8), rng);
  for (const auto* k : tables(kernels::attention_kernels_for)) {
    for (int64_t n : lengths()) {
      for (int off = 0; off < 8; ++off) {
        const float* x = a.data() + off;
        const float* rows[4] = {w.data() + (off + 1) % 8, w.data() + (max_n + 8) + (off + 3) % 8,
                                w.data() + 2 * (max_n + 8) + (off + 5) % 8,
                                w.data() + 3 * (max_n + 8) + (off + 6) % 8};
        float out4[4];
        k->dot4(x, rows, n, out4);
        for (int r = 0; r < 4; ++r) {
          double exact = 0.0, magnitude = 0.0;
          for (int64_t i = 0; i < n; ++i) {
            exact += static_cast<double>(x[i]) * rows[r][i];
            magnitude += std::fabs(static_cast<double>(x[i]) * rows[r][i]);
          }
          const float got = k->dot(x, rows[r], n);
          // n products and sums, each rounding once: |err| <= 2 n u sum|x_i w_i|.
          ASSERT_LE(std::fabs(got - exact), 2.0 * n * kU * magnitude)
              << kernels::cpu_isa_name(k->isa) << " n=" << n << " off=" << off;
          ASSERT_EQ(bits_of(out4[r]), bits_of(got)) << kernels::cpu_isa_name(k->isa) << " n=" << n;
        }
      }
    }
  }
}

TEST(KernelIsaAttention, EveryLevelAndKvTypeMatchesFloat64Attention) {
  const int64_t n_heads = 12, n_kv = 2, group = n_heads / n_kv, n_blocks = 6;
  const std::vector<int32_t> block_table = {4, 1, 5, 0};  // non-contiguous
  std::mt19937 rng(76);
  for (int64_t d : {8, 36, 128}) {
    for (DType element : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
      if (element == DType::Q8_0 && d % 32 != 0) continue;
      const size_t row_size = row_bytes(element, d);
      std::vector<uint8_t> k_bytes(n_blocks * n_kv * 16 * row_size), v_bytes(k_bytes.size());
      kernels::KvLayerView kv;
      kv.k = k_bytes.data();
      kv.v = v_bytes.data();
      kv.element_type = element;
      kv.row_bytes = row_size;
      kv.n_kv_heads = n_kv;
      kv.head_dim = d;
      const int64_t max_context = 16 * static_cast<int64_t>(block_table.size());
      std::vector<float> k = random_floats(static_cast<size_t>(max_context * n_kv * d), rng);
      std::vector<float> v = random_floats(static_cast<size_t>(max_context * n_kv * d), rng);
      for (int64_t p = 0; p < max_context; ++p) {
        kernels::kv_store(kv, block_table[p / 16] * 16 + static_cast<int32_t>(p % 16),
                          k.data() + p * n_kv * d, v.data() + p * n_kv * d);
      }
      // The reference works on the stored (decoded) values; the kernels' error is f32 arithmetic.
      for (int64_t p = 0; p < max_context; ++p) {
        for (int64_t g = 0; g < n_kv; ++g) {
          const size_t off = kv.row_offset(block_table[p / 16], g, static_cast<int32_t>(p % 16));
          dequantize_row(element, kv.k + off, k.data() + (p * n_kv + g) * d, d);
          dequantize_row(element, kv.v + off, v.data() + (p * n_kv + g) * d, d);
        }
      }
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      for (int64_t n_context : {int64_t{1}, int64_t{9}, int64_t{16}, int64_t{33}, max_context}) {
        const std::vector<float> q = random_floats(static_cast<size_t>(n_heads * d), rng, 2.0f);
        for (const auto* kern : tables(kernels::attention_kernels_for)) {
          std::vector<float> out(static_cast<size_t>(n_heads * d), NAN);
          kern->token(q.data(), {n_heads, n_kv, d}, kv, block_table.data(), n_context, out.data());
          for (int64_t h = 0; h < n_heads; ++h) {
            const int64_t g = h / group;
            std::vector<double> s(static_cast<size_t>(n_context));
            double s_max = -INFINITY, s_abs_max = 0.0, score_err = 0.0;
            for (int64_t j = 0; j < n_context; ++j) {
              double dot = 0.0, magnitude = 0.0;
              for (int64_t i = 0; i < d; ++i) {
                dot += static_cast<double>(q[h * d + i]) * k[(j * n_kv + g) * d + i];
                magnitude += std::fabs(static_cast<double>(q[h * d + i]) * k[(j * n_kv + g) * d + i]);
              }
              s[j] = dot * scale;
              s_max = std::max(s_max, s[j]);
              s_abs_max = std::max(s_abs_max, std::fabs(s[j]));
              score_err = std::max(score_err, scale * 2.0 * d * kU * magnitude + kU * std::fabs(s[j]));
            }
            // exp(s - max): the subtraction and the exp (relative error < 2^-22 on AVX2, < 1 ulp
            // in libm), plus one rescaling exp and product per KV block.
            const double n_kv_blocks = static_cast<double>((n_context + 15) / 16);
            score_err += 2.0 * kU * s_abs_max + (1.0 + n_kv_blocks) * (0x1p-22 + kU);
            std::vector<double> p(static_cast<size_t>(n_context));
            double denom = 0.0;
            for (int64_t j = 0; j < n_context; ++j) denom += p[j] = std::exp(s[j] - s_max);
            const double weight_rel = std::expm1(2.0 * score_err);
            for (int64_t i = 0; i < d; ++i) {
              double expected = 0.0, magnitude = 0.0;
              for (int64_t j = 0; j < n_context; ++j) {
                expected += p[j] / denom * v[(j * n_kv + g) * d + i];
                magnitude += p[j] / denom * std::fabs(v[(j * n_kv + g) * d + i]);
              }
              const double tol = (weight_rel + 4.0 * (n_context + 4) * kU) * magnitude;
              ASSERT_LE(std::fabs(out[h * d + i] - expected), tol)
                  << kernels::cpu_isa_name(kern->isa) << " " << dtype_name(element) << " d=" << d
                  << " n_context=" << n_context << " head " << h << " i=" << i;
            }
          }
        }
      }
    }
  }
}

// A tile's tokens share K / V rows but nothing else: on every level, KV type, group size (one and
// two passes of 8 query heads) and tile shape (consecutive positions across block boundaries,
// scattered contexts, 1..kMaxQueryTile tokens, strided rows), each token's output is bit-identical
// to paged_attention_token's for that token alone (which the test above checks against float64).
TEST(KernelIsaAttention, TileEqualsTokenBitForBitOnEveryLevel) {
  struct Shape {
    int64_t n_heads, n_kv, d;
    DType element;
  };
  const std::vector<Shape> shapes = {{12, 2, 128, DType::F16}, {12, 2, 128, DType::F32},
                                     {8, 2, 64, DType::Q8_0},  {16, 1, 36, DType::BF16},
                                     {32, 8, 128, DType::F16}};
  const std::vector<int32_t> block_table = {6, 2, 9, 0, 4};  // non-contiguous
  const int64_t n_blocks = 10, max_context = 16 * 5;
  std::mt19937 rng(1177);
  // Tiles as contexts (position + 1) per token: consecutive runs starting at several offsets and
  // of every length, then scattered contexts in a tile.
  std::vector<std::vector<int64_t>> tiles;
  for (int64_t first : {1, 11, 15, 16, 31, 70}) {
    for (int n_q = 1; n_q <= kernels::kMaxQueryTile; ++n_q) {
      std::vector<int64_t> ctx;
      for (int t = 0; t < n_q && first + t <= max_context; ++t) ctx.push_back(first + t);
      tiles.push_back(ctx);
    }
  }
  tiles.push_back({64, 1, 17, 33, 5, 48, 16, 2});
  tiles.push_back({80, 80, 3});
  for (const Shape& shape : shapes) {
    const int64_t d = shape.d, q_dim = shape.n_heads * d;
    const size_t row_size = row_bytes(shape.element, d);
    std::vector<uint8_t> k_bytes(n_blocks * shape.n_kv * 16 * row_size), v_bytes(k_bytes.size());
    kernels::KvLayerView kv;
    kv.k = k_bytes.data();
    kv.v = v_bytes.data();
    kv.element_type = shape.element;
    kv.row_bytes = row_size;
    kv.n_kv_heads = shape.n_kv;
    kv.head_dim = d;
    for (int64_t p = 0; p < max_context; ++p) {
      const std::vector<float> k = random_floats(static_cast<size_t>(shape.n_kv * d), rng);
      const std::vector<float> v = random_floats(static_cast<size_t>(shape.n_kv * d), rng);
      kernels::kv_store(kv, block_table[p / 16] * 16 + static_cast<int32_t>(p % 16), k.data(), v.data());
    }
    const kernels::AttentionShape attention{shape.n_heads, shape.n_kv, d};
    for (const auto& ctx : tiles) {
      const int n_q = static_cast<int>(ctx.size());
      // Rows strided by q_dim + 8 floats, so the kernel must honour the strides.
      const int64_t stride = q_dim + 8;
      const std::vector<float> q = random_floats(static_cast<size_t>(n_q * stride), rng, 2.0f);
      for (const auto* kern : tables(kernels::attention_kernels_for)) {
        std::vector<float> tiled(static_cast<size_t>(n_q * stride), NAN);
        kern->tile(q.data(), stride, n_q, ctx.data(), attention, kv, block_table.data(), tiled.data(), stride);
        for (int t = 0; t < n_q; ++t) {
          std::vector<float> alone(static_cast<size_t>(q_dim), NAN);
          kern->token(q.data() + t * stride, attention, kv, block_table.data(), ctx[t], alone.data());
          for (int64_t i = 0; i < q_dim; ++i) {
            ASSERT_EQ(bits_of(tiled[t * stride + i]), bits_of(alone[i]))
                << kernels::cpu_isa_name(kern->isa) << " " << dtype_name(shape.element) << " heads "
                << shape.n_heads << "/" << shape.n_kv << " tile of " << n_q << " token " << t
                << " context " << ctx[t] << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(KernelIsaElementwise, RmsNormEveryLevelMatchesFloat64) {
  std::mt19937 rng(72);
  const std::vector<float> xs = random_floats(4099 + 8, rng, 3.0f);
  const std::vector<float> ws = random_floats(4099 + 8, rng);
  for (const auto* k : tables(kernels::elementwise_kernels_for)) {
    for (int64_t n : lengths()) {
      const int off = static_cast<int>(n % 8);
      const float* x = xs.data() + off;
      const float* wt = ws.data() + (off + 3) % 8;
      double sum_sq = 0.0;
      for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
      const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + 1e-6);
      std::vector<float> out(static_cast<size_t>(n) + 1);
      k->rms_norm(x, wt, n, 1e-6, out.data() + 1);  // misaligned output too
      for (int64_t i = 0; i < n; ++i) {
        const double expected = static_cast<double>(x[i]) * inv_rms * wt[i];
        ASSERT_LE(std::fabs(out[i + 1] - expected), 4.0 * kU * std::fabs(expected) + 1e-30)
            << kernels::cpu_isa_name(k->isa) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(KernelIsaElementwise, RopeEveryLevelMatchesRotationOfItsOwnCosSin) {
  std::mt19937 rng(73);
  for (const auto* k : tables(kernels::elementwise_kernels_for)) {
    for (int64_t d : {2, 4, 6, 16, 34, 64, 128, 256}) {
      const int64_t n_heads = 3, half = d / 2;
      std::vector<float> cos_sin(static_cast<size_t>(d));
      kernels::rope_cos_sin(12345, d, 1e6, cos_sin.data());
      for (int off = 0; off < 8; off += 3) {
        std::vector<float> buf = random_floats(static_cast<size_t>(n_heads * d + off), rng, 2.0f);
        const std::vector<float> x(buf.begin() + off, buf.end());
        k->rope_neox(buf.data() + off, n_heads, d, cos_sin.data());
        for (int64_t h = 0; h < n_heads; ++h) {
          for (int64_t i = 0; i < half; ++i) {
            const double a = x[h * d + i], b = x[h * d + i + half];
            const double c = cos_sin[i], s = cos_sin[half + i];
            // Two products and one sum in f32 (FMA or not): within 2u (|a c| + |b s|).
            const double tol = 2.0 * kU * (std::fabs(a * c) + std::fabs(b * s)) + 1e-38;
            const double tol2 = 2.0 * kU * (std::fabs(b * c) + std::fabs(a * s)) + 1e-38;
            ASSERT_LE(std::fabs(buf[off + h * d + i] - (a * c - b * s)), tol)
                << kernels::cpu_isa_name(k->isa) << " d=" << d << " i=" << i;
            ASSERT_LE(std::fabs(buf[off + h * d + i + half] - (b * c + a * s)), tol2)
                << kernels::cpu_isa_name(k->isa) << " d=" << d << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(KernelIsaElementwise, SiluMulEveryLevelMatchesFloat64) {
  std::mt19937 rng(74);
  std::vector<float> gate = random_floats(4099 + 8, rng, 6.0f);
  // Around 80, where the AVX2 path hands a vector to the scalar formula, and beyond f32 exp's range.
  for (float g : {0.0f, -0.0f, 1e-30f, 79.99f, -79.99f, 80.0f, -80.0f, 80.01f, -80.01f, 88.0f, -88.0f, 1000.0f,
                  -1000.0f}) {
    gate.insert(gate.begin(), g);  // at the front, where the lengths below reach them
  }
  const std::vector<float> up = random_floats(gate.size(), rng);
  for (const auto* k : tables(kernels::elementwise_kernels_for)) {
    for (int64_t n : lengths()) {
      for (int off : {0, 5}) {
        if (off + n > static_cast<int64_t>(gate.size())) continue;
        std::vector<float> out(gate.begin() + off, gate.begin() + off + n);
        k->silu_mul(out.data(), up.data() + off, n);
        for (int64_t i = 0; i < n; ++i) {
          const double g = gate[off + i];
          const double expected = g / (1.0 + std::exp(-g)) * up[off + i];
          ASSERT_LE(std::fabs(out[i] - expected), 8.0 * kU * std::fabs(expected) + 1e-37)
              << kernels::cpu_isa_name(k->isa) << " g=" << g;
        }
      }
    }
  }
}

// Batch invariance (CpuBackend::batch_invariant): an element's SiLU depends only on its own gate and
// up values, not on where it sits in a vector or in the call, so splitting a row over threads (any
// intermediate size) gives the same bits. Values at the hand-off to the scalar formula (|g| = 80
// stays on the vector path, 80.01 leaves it) sit inside 8-lane groups and in tails.
TEST(KernelIsaElementwise, SiluMulOfAnElementDoesNotDependOnItsNeighbours) {
  std::mt19937 rng(76);
  std::vector<float> gate = random_floats(203, rng, 30.0f);
  const float specials[] = {80.0f, -80.0f, 80.01f, -80.01f, 79.99f, -200.0f, 1e-40f, -0.0f};
  for (size_t i = 0; i < std::size(specials); ++i) gate[3 + 17 * i] = specials[i];
  const std::vector<float> up = random_floats(gate.size(), rng);
  for (const auto* k : tables(kernels::elementwise_kernels_for)) {
    std::vector<float> whole = gate;
    k->silu_mul(whole.data(), up.data(), static_cast<int64_t>(whole.size()));
    for (size_t i = 0; i < gate.size(); ++i) {
      float one = gate[i];
      k->silu_mul(&one, &up[i], 1);
      ASSERT_EQ(bits_of(one), bits_of(whole[i])) << kernels::cpu_isa_name(k->isa) << " g=" << gate[i];
    }
    for (size_t split : {1, 5, 13, 100}) {  // two calls, as two threads would make
      std::vector<float> parts = gate;
      k->silu_mul(parts.data(), up.data(), static_cast<int64_t>(split));
      k->silu_mul(parts.data() + split, up.data() + split, static_cast<int64_t>(gate.size() - split));
      for (size_t i = 0; i < gate.size(); ++i) {
        ASSERT_EQ(bits_of(parts[i]), bits_of(whole[i])) << kernels::cpu_isa_name(k->isa) << " split " << split;
      }
    }
    for (float g : specials) {  // and each special within the float64 bound
      float out = g;
      const float u = 1.5f;
      k->silu_mul(&out, &u, 1);
      const double expected = static_cast<double>(g) / (1.0 + std::exp(-static_cast<double>(g))) * u;
      EXPECT_LE(std::fabs(out - expected), 8.0 * kU * std::fabs(expected) + 1e-37) << "g=" << g;
    }
  }
}

TEST(KernelIsaConvert, EveryLevelDecodesLikeScalarWithinOneFmaRounding) {
  std::mt19937 rng(75);
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                         DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  const DequantizeKernels& scalar = scalar_dequantize_kernels();
  for (const DequantizeKernels* k : tables(dequantize_kernels_for)) {
    for (DType dtype : types) {
      const int64_t block = static_cast<int64_t>(dtype_info(dtype).block_size);
      for (int64_t n : {block, 2 * block, 8 * block, int64_t{3 * 256} + (block == 1 ? 13 : 0)}) {
        const std::vector<float> x = random_floats(static_cast<size_t>(n), rng, 4.0f);
        std::vector<uint8_t> row(row_bytes(dtype, n) + 3);
        uint8_t* src = row.data() + 3;  // misaligned source
        quantize_row(dtype, x.data(), src, n);
        std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n) + 1);
        ASSERT_TRUE(scalar.row(dtype, src, want.data(), n));
        ASSERT_TRUE(k->row(dtype, src, got.data() + 1, n));
        double max_abs = 0.0;
        for (float v : want) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
        // Only Q4_K / Q5_K round differently: y = step * q - shift in one FMA or two roundings,
        // with |step * q| <= 2 max|y| (shift = -min y): |difference| <= 4u max|y|.
        const bool fused = dtype == DType::Q4_K || dtype == DType::Q5_K;
        for (int64_t i = 0; i < n; ++i) {
          if (fused) {
            ASSERT_LE(std::fabs(got[i + 1] - want[i]), 4.0 * kU * max_abs)
                << kernels::cpu_isa_name(k->isa) << " " << dtype_name(dtype) << " i=" << i;
          } else {
            ASSERT_EQ(bits_of(got[i + 1]), bits_of(want[i]))
                << kernels::cpu_isa_name(k->isa) << " " << dtype_name(dtype) << " i=" << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace qs
