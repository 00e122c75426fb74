// 16-row packed weights (kernels/packed_rows.h): the packing is an exact permutation of the file's
// bytes (unpacking gives the original rows back), and the AVX-512 VNNI kernels on packed weights
// (and the AMX tile kernels) return, bit for bit, what the row-major kernels return (Q4_K, Q6_K;
// Q8_0: what its own one-token products return, which match float64 of the quantized operands) for
// every token count, thread count and chunking, and stay within the float64 bound of the decoded
// operands. The
// kernel tests are skipped, with the reason, on CPUs without AVX-512 VNNI (AMX); the packing tests
// run everywhere.
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
#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kernels/packed_rows.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/dtype.h"
#include "support/vnni_kernels.h"
#include "formats/quantize.h"
#include "formats/tensor.h"

namespace qs {
namespace {

using kernels::CpuIsa;
using kernels::DotKernels;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// [rows, n] weights quantized from normals (every third row one-signed: large K-quant mins) and
// their decoded values.
struct Weights {
  size_t stride = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> decoded;
};

Weights make_weights(DType dtype, int64_t rows, int64_t n, std::mt19937& rng) {
  Weights w;
  std::normal_distribution<float> dist(0.0f, 0.5f);
  w.stride = row_bytes(dtype, n);
  w.bytes.resize(w.stride * rows);
  w.decoded.resize(static_cast<size_t>(rows * n));
  std::vector<float> x(n);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : x) v = r % 3 == 2 ? std::fabs(dist(rng)) + 0.25f : dist(rng);
    quantize_row(dtype, x.data(), w.bytes.data() + r * w.stride, n);
    dequantize_row(dtype, w.bytes.data() + r * w.stride, w.decoded.data() + r * n, n);
  }
  return w;
}

std::vector<uint8_t> pack_all(DType dtype, const Weights& w, int64_t rows, int64_t n) {
  std::vector<uint8_t> packed(kernels::packed_matrix_bytes(dtype, rows, n));
  const int64_t groups = (rows + kernels::kPackedRows - 1) / kernels::kPackedRows;
  // Two calls over disjoint group ranges, as the loader's threads do.
  kernels::pack_rows16(dtype, w.bytes.data(), rows, n, 0, groups / 2, packed.data());
  kernels::pack_rows16(dtype, w.bytes.data(), rows, n, groups / 2, groups, packed.data());
  return packed;
}

TEST(KernelPackedRows, PackingIsAnExactPermutationOfTheFileBytes) {
  std::mt19937 rng(1602);
  for (DType dtype : {DType::Q4_K, DType::Q6_K, DType::Q8_0}) {
    for (int64_t rows : {1, 15, 16, 37}) {
      const int64_t n = dtype == DType::Q8_0 ? 96 : 512;
      const Weights w = make_weights(dtype, rows, n, rng);
      const std::vector<uint8_t> packed = pack_all(dtype, w, rows, n);
      EXPECT_EQ(packed.size(), kernels::packed_group_bytes(dtype, n) * static_cast<size_t>((rows + 15) / 16));
      std::vector<uint8_t> row(w.stride);
      for (int64_t r = 0; r < rows; ++r) {
        kernels::unpack_row16(dtype, packed.data(), n, r, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), w.bytes.data() + r * w.stride, w.stride))
            << dtype_name(dtype) << " rows " << rows << " row " << r;
      }
    }
  }
}

TEST(KernelPackedRows, SizesAndRejections) {
  // Same bytes as the file for Q6_K and Q8_0; Q4_K keeps its 6-bit scales unpacked (+64 B per 16 rows).
  EXPECT_EQ(kernels::packed_group_bytes(DType::Q6_K, 256), 16 * row_bytes(DType::Q6_K, 256));
  EXPECT_EQ(kernels::packed_group_bytes(DType::Q8_0, 64), 16 * row_bytes(DType::Q8_0, 64));
  EXPECT_EQ(kernels::packed_group_bytes(DType::Q4_K, 256), 16 * row_bytes(DType::Q4_K, 256) + 64);
  EXPECT_THROW(kernels::packed_group_bytes(DType::Q4_K, 200), Error);
  EXPECT_THROW(kernels::packed_group_bytes(DType::F16, 256), Error);
  EXPECT_FALSE(kernels::packable_dtype(DType::Q5_K));
}

const DotKernels* vnni_or_skip_reason(std::string* reason) { return test::vnni_kernels_or_skip_reason(reason); }

// The packed Q8_0 matmul against float64 of its own quantized operands: y[t][r] = sum_b
// f32(d_w * d_a) * S_b with S_b the exact integer dot of block b, accumulated by one f32 fma per
// block (packed_rows_avx512_vnni.cc): within 2^-22 (the product's and the fma's roundings) times
// the number of blocks times the sum of the terms' magnitudes.
void expect_q8_0_matches_float64_of_quantized_operands(const DotKernels& k, const Weights& w,
                                                       const std::vector<float>& x, int64_t out, int64_t in,
                                                       int64_t n_tokens, const std::vector<float>& y) {
  const int64_t nb = in / 32;
  std::vector<BlockQ8_0A> a(static_cast<size_t>(nb));
  for (int64_t t = 0; t < n_tokens; ++t) {
    k.quantize_q8_0a(x.data() + t * in, a.data(), in);
    for (int64_t r = 0; r < out; ++r) {
      const auto* wb = reinterpret_cast<const BlockQ8_0*>(w.bytes.data() + r * w.stride);
      double sum = 0, magnitude = 0;
      for (int64_t b = 0; b < nb; ++b) {
        int64_t dot = 0;
        for (int i = 0; i < 32; ++i) dot += int64_t{wb[b].qs[i]} * a[b].qs[i];
        const double term = static_cast<double>(fp16_to_fp32(wb[b].d)) * a[b].d * static_cast<double>(dot);
        sum += term;
        magnitude += std::fabs(term);
      }
      EXPECT_NEAR(y[t * out + r], sum, std::ldexp(magnitude * static_cast<double>(nb), -22) + 1e-30)
          << "Q8_0 token " << t << " row " << r;
    }
  }
}

// The packed matmul of table `k` against the row-major AVX2 one, bit for bit, and float64.
void expect_packed_matmul_bit_identical(const DotKernels* k) {
  const DotKernels* avx2 = kernels::dot_kernels_for(CpuIsa::kAvx2);
  ASSERT_NE(avx2, nullptr);
  std::mt19937 rng(1603);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  ThreadPool pool1(1), pool3(3);
  for (DType dtype : {DType::Q4_K, DType::Q6_K, DType::Q8_0}) {
    ASSERT_NE(k->packed_gemm(dtype), nullptr) << dtype_name(dtype);
    for (int64_t in : {256, 768, 2560}) {
      const int64_t out = 37;  // two full groups and a partial one
      const Weights w = make_weights(dtype, out, in, rng);
      const std::vector<uint8_t> packed = pack_all(dtype, w, out, in);
      TensorView rowmajor{"w", dtype, {out, in}, w.bytes.data(), w.bytes.size()};
      TensorView view = rowmajor;
      view.data = packed.data();
      view.size_bytes = packed.size();
      view.layout = TensorLayout::kPackedRows16;
      const int64_t max_tokens = 530;
      std::vector<float> x(max_tokens * in), bias(out);
      for (float& v : x) v = dist(rng);
      for (float& v : bias) v = dist(rng);
      kernels::MatmulScratch big(3, in, 544), small(3, in, 5);  // small: chunks of 5 tokens
      // Reference, token by token: Q4_K / Q6_K: the row-major matmul of the AVX2 level (itself
      // checked against float64 in kernels_quant_test.cc). Q8_0: the packed kernel sums a 32-element
      // block in one int32 where the row-major kernels keep two 16-element halves, so its one-token
      // products are the reference (checked against float64 of the same quantized operands below)
      // and every batching must reproduce them bit for bit.
      const bool own_reference = dtype == DType::Q8_0;
      const DotKernels& ref_kernels = own_reference ? *k : *avx2;
      const TensorView& ref_view = own_reference ? view : rowmajor;
      std::vector<float> expect(max_tokens * out), expect_bias(max_tokens * out);
      for (int64_t t = 0; t < max_tokens; ++t) {
        kernels::matmul_with(ref_kernels, ref_view, x.data() + t * in, 1, expect.data() + t * out, pool1, big);
        kernels::matmul_with(ref_kernels, ref_view, x.data() + t * in, 1, expect_bias.data() + t * out, pool1, big,
                             bias.data());
      }
      if (own_reference) expect_q8_0_matches_float64_of_quantized_operands(*k, w, x, out, in, 16, expect);
      // 150: 9 whole chunks of 16 for the AMX kernel and a VNNI remainder of 6; 530: 33 chunks,
      // two passes of it (32 chunks share an unpacking), remainder 2.
      for (int64_t n_tokens : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 21, 33, 150, 530}) {
        for (ThreadPool* pool : {&pool1, &pool3}) {
          for (kernels::MatmulScratch* scratch : {&big, &small}) {
            std::vector<float> y(n_tokens * out, NAN), yb(n_tokens * out, NAN);
            kernels::matmul_with(*k, view, x.data(), n_tokens, y.data(), *pool, *scratch);
            kernels::matmul_with(*k, view, x.data(), n_tokens, yb.data(), *pool, *scratch, bias.data());
            for (int64_t i = 0; i < n_tokens * out; ++i) {
              ASSERT_EQ(bits_of(y[i]), bits_of(expect[i]))
                  << dtype_name(dtype) << " in " << in << " tokens " << n_tokens << " token " << i / out << " row "
                  << i % out;
              ASSERT_EQ(bits_of(yb[i]), bits_of(expect_bias[i])) << dtype_name(dtype) << " with bias";
            }
          }
        }
      }
      // Against float64 of the decoded weights and the f32 activations: within the activation
      // quantization error (8-bit, relative 1/127 per element of the largest in its block) plus f32.
      for (int64_t t = 0; t < 3; ++t) {
        for (int64_t r = 0; r < out; ++r) {
          double sum = 0, magnitude = 0;
          for (int64_t i = 0; i < in; ++i) {
            sum += static_cast<double>(w.decoded[r * in + i]) * x[t * in + i];
            magnitude += std::fabs(static_cast<double>(w.decoded[r * in + i])) * 4.0;  // |x| <~ 4 sigma
          }
          EXPECT_NEAR(expect[t * out + r], sum, magnitude / 127.0 + 1e-3) << dtype_name(dtype);
        }
      }
    }
  }
}

TEST(KernelPackedRows, MatmulIsBitIdenticalToRowMajorForEveryTokenCountAndWithinFloat64Bound) {
  std::string reason;
  const DotKernels* k = vnni_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  expect_packed_matmul_bit_identical(k);
}

// One-token products take another instantiation without software prefetch where the CPU backend
// measured it faster (decode_prefetch.h): the same bits.
TEST(KernelPackedRows, MatmulWithoutDecodePrefetchIsBitIdenticalToRowMajor) {
  std::string reason;
  const DotKernels* k = vnni_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  const bool before = kernels::packed_decode_prefetch();
  kernels::set_packed_decode_prefetch(!before);
  expect_packed_matmul_bit_identical(k);
  kernels::set_packed_decode_prefetch(before);
}

// The AMX tile kernels (Q4_K, Q6_K at 2-16 tokens per pass; the rest is the VNNI table's).
TEST(KernelPackedRows, AmxMatmulIsBitIdenticalToRowMajorForEveryTokenCountAndWithinFloat64Bound) {
  std::string reason;
  const DotKernels* k = test::amx_kernels_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  ASSERT_NE(k->packed_gemm(DType::Q4_K), test::vnni_kernels_or_skip_reason(&reason)->packed_gemm(DType::Q4_K))
      << "the amx table must carry its own Q4_K kernel";
  expect_packed_matmul_bit_identical(k);
}

TEST(KernelPackedRows, ExtremeLevelsAreExact) {
  // Q8_0 levels -128 / 127 against activations of +-127 (the stored q + 128 spans 0..255, the
  // correction -128 * sum(a) is largest): with unit scales every product and sum is an integer far
  // below 2^24, so the f32 result must equal the integer dot exactly.
  std::string reason;
  const DotKernels* k = vnni_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  ThreadPool pool(1);
  const int64_t n = 256, rows = 18;
  {
    const int8_t levels[] = {-128, 127, -127, 0, 1};
    std::vector<BlockQ8_0> w(rows * n / 32);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < n / 32; ++b) {
        BlockQ8_0& blk = w[r * (n / 32) + b];
        blk.d = fp32_to_fp16(1.0f);
        for (int i = 0; i < 32; ++i) blk.qs[i] = r < 2 ? levels[r] : levels[(i + b + r) % 5];
      }
    }
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = (i % 3 == 0) ? -127.0f : 127.0f;  // quantizes to +-127, d = 1
    const auto* bytes = reinterpret_cast<const uint8_t*>(w.data());
    Weights wt;
    wt.stride = row_bytes(DType::Q8_0, n);
    wt.bytes.assign(bytes, bytes + w.size() * sizeof(BlockQ8_0));
    const std::vector<uint8_t> packed = pack_all(DType::Q8_0, wt, rows, n);
    TensorView view{"w", DType::Q8_0, {rows, n}, packed.data(), packed.size()};
    view.layout = TensorLayout::kPackedRows16;
    kernels::MatmulScratch scratch(1, n, 8);
    std::vector<float> y(rows, NAN);
    kernels::matmul_with(*k, view, x.data(), 1, y.data(), pool, scratch);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += int64_t{w[r * (n / 32) + i / 32].qs[i % 32]} * (i % 3 == 0 ? -127 : 127);
      EXPECT_EQ(y[r], static_cast<float>(dot)) << "Q8_0 row " << r;
    }
  }
}

// matmul_outputs (Q, K and V; gate and up): the products of one input in one packed pass return,
// bit for bit, what one matmul_with per weight returns (checked against the row-major kernels and
// float64 above), for every token count, chunking and thread count, and stay within the float64
// bound of the decoded operands. Q4_K beside Q6_K share the Q8_K activations but not their packed
// terms (two extra slices); mixes one pass cannot serve (Q8_0 beside Q4_K, a row-major weight) run
// one call per weight, with the same bits.
TEST(KernelPackedRows, FusedOutputsEqualOneMatmulPerWeight) {
  std::string reason;
  const DotKernels* k = vnni_or_skip_reason(&reason);
  if (k == nullptr) GTEST_SKIP() << reason;
  struct Spec {
    DType dtype;
    int64_t rows;
    bool packed;
    bool bias;
  };
  const std::vector<std::vector<Spec>> cases = {
      {{DType::Q4_K, 37, true, true}, {DType::Q4_K, 16, true, false}, {DType::Q6_K, 21, true, true}},
      {{DType::Q8_0, 33, true, false}, {DType::Q8_0, 16, true, true}},
      {{DType::Q8_0, 37, true, false}, {DType::Q4_K, 16, true, false}},
      {{DType::Q4_K, 37, false, false}, {DType::Q6_K, 16, true, true}, {DType::Q4_K, 5, true, false}},
  };
  const int64_t in = 512, max_tokens = 40;
  std::mt19937 rng(1604);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(max_tokens * in);
  for (float& v : x) v = dist(rng);
  ThreadPool pool1(1), pool3(3);
  kernels::MatmulScratch big(3, in, 64), small(3, in, 5);
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<Weights> weights;
    std::vector<std::vector<uint8_t>> packed;
    std::vector<TensorView> views;
    std::vector<std::vector<float>> biases;
    for (const Spec& spec : cases[c]) {
      weights.push_back(make_weights(spec.dtype, spec.rows, in, rng));
      packed.push_back(pack_all(spec.dtype, weights.back(), spec.rows, in));
      std::vector<float> bias(spec.rows);
      for (float& v : bias) v = dist(rng);
      biases.push_back(spec.bias ? bias : std::vector<float>{});
    }
    for (size_t i = 0; i < cases[c].size(); ++i) {
      const Spec& spec = cases[c][i];
      TensorView view{"w" + std::to_string(i), spec.dtype, {spec.rows, in}, weights[i].bytes.data(),
                      weights[i].bytes.size()};
      if (spec.packed) {
        view.data = packed[i].data();
        view.size_bytes = packed[i].size();
        view.layout = TensorLayout::kPackedRows16;
      }
      views.push_back(view);
    }
    // One matmul_with per weight, all tokens at once, one thread: the reference.
    std::vector<std::vector<float>> expect;
    for (size_t i = 0; i < views.size(); ++i) {
      expect.emplace_back(max_tokens * views[i].rows(), NAN);
      kernels::matmul_with(*k, views[i], x.data(), max_tokens, expect[i].data(), pool1, big,
                           biases[i].empty() ? nullptr : biases[i].data());
      for (int64_t r = 0; r < views[i].rows(); ++r) {  // token 0 against float64
        double sum = biases[i].empty() ? 0.0 : biases[i][r], magnitude = 0;
        for (int64_t j = 0; j < in; ++j) {
          sum += static_cast<double>(weights[i].decoded[r * in + j]) * x[j];
          magnitude += std::fabs(static_cast<double>(weights[i].decoded[r * in + j])) * 4.0;
        }
        EXPECT_NEAR(expect[i][r], sum, magnitude / 127.0 + 1e-3) << "case " << c << " weight " << i;
      }
    }
    for (int64_t n_tokens : {1, 2, 5, 12, 13, 40}) {
      for (ThreadPool* pool : {&pool1, &pool3}) {
        for (kernels::MatmulScratch* scratch : {&big, &small}) {
          std::vector<std::vector<float>> y;
          std::vector<kernels::MatmulOutput> outputs;
          for (size_t i = 0; i < views.size(); ++i) y.emplace_back(n_tokens * views[i].rows(), NAN);
          for (size_t i = 0; i < views.size(); ++i) {
            outputs.push_back({&views[i], y[i].data(), biases[i].empty() ? nullptr : biases[i].data()});
          }
          kernels::matmul_outputs_with(*k, outputs, x.data(), n_tokens, *pool, *scratch);
          for (size_t i = 0; i < views.size(); ++i) {
            for (int64_t e = 0; e < n_tokens * views[i].rows(); ++e) {
              ASSERT_EQ(bits_of(y[i][e]), bits_of(expect[i][e]))
                  << "case " << c << " weight " << i << " tokens " << n_tokens << " threads " << pool->n_threads()
                  << " element " << e;
            }
          }
        }
      }
    }
  }
}

TEST(KernelPackedRows, PackedWeightOnATableWithoutPackedKernelsIsAnError) {
  const DotKernels& scalar = kernels::scalar_dot_kernels();
  std::vector<uint8_t> packed(kernels::packed_matrix_bytes(DType::Q8_0, 16, 32));
  TensorView view{"blk.0.attn_q.weight", DType::Q8_0, {16, 32}, packed.data(), packed.size()};
  view.layout = TensorLayout::kPackedRows16;
  ThreadPool pool(1);
  kernels::MatmulScratch scratch(1, 32, 4);
  std::vector<float> x(32, 1.0f), y(16);
  try {
    kernels::matmul_with(scalar, view, x.data(), 1, y.data(), pool, scratch);
    FAIL() << "expected qs::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight"), std::string::npos) << e.what();
  }
  // The same through a fused call, the packed weight second.
  TensorView other = view;
  other.name = "blk.0.attn_k.weight";
  std::vector<float> y2(16);
  const kernels::MatmulOutput outputs[] = {{&view, y.data(), nullptr}, {&other, y2.data(), nullptr}};
  try {
    kernels::matmul_outputs_with(scalar, outputs, x.data(), 1, pool, scratch);
    FAIL() << "expected qs::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.attn_"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qs
