// Quantized and float dot kernels on every ISA level this CPU runs, the ISA dispatch, and matmul
// over every weight type.
//
// References: each dot is checked against a float64 sum over the decoded operands (weights via
// the reference dequantize_row, itself checked against the spec in quant_test; activations as
// d * q from their blocks). The kernels' only error is f32 rounding of per-block scale products
// and sums, bounded by (blocks + 8) * 2^-23 * sum_i |terms|, where the terms include the K-quant
// min offsets the kernels subtract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "core/error.h"
#include "formats/tensor.h"
#include "core/thread_pool.h"
#include "backend/cpu/kernels/cpu_isa.h"
#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/matmul.h"
#include "formats/quantize.h"

namespace qs {
namespace {

using kernels::ActivationFormat;
using kernels::CpuIsa;
using kernels::DotKernels;

constexpr double kEpsF32 = 0x1p-23;
constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                               DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};

std::vector<const DotKernels*> available_kernels() {
  std::vector<const DotKernels*> out;
  for (int level = 0; level < kCpuIsaLevels; ++level) {
    const auto isa = static_cast<CpuIsa>(level);
    if (const DotKernels* k = kernels::dot_kernels_for(isa)) out.push_back(k);
  }
  return out;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::vector<float> normal_floats(int64_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Row lengths to try per type: every tail for the float types, several block counts otherwise.
std::vector<int64_t> lengths_for(DType dtype) {
  const int64_t block = static_cast<int64_t>(dtype_info(dtype).block_size);
  if (block == 1) {
    std::vector<int64_t> n;
    for (int64_t i = 1; i <= 40; ++i) n.push_back(i);
    for (int64_t i : {63, 64, 65, 255, 1000, 2561}) n.push_back(i);
    return n;
  }
  if (block == 32) return {32, 64, 96, 288, 2560};
  return {256, 512, 768, 2560};
}

// A weight matrix [rows, n] of `dtype` from random normal values, and its decoded values.
struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
  std::vector<double> max_abs;  // per row: bounds the K-quant min offsets
};

Weights make_weights(DType dtype, int64_t rows, int64_t n, std::mt19937& rng) {
  Weights w;
  const size_t stride = row_bytes(dtype, n);
  w.bytes.resize(stride * rows);
  std::vector<float> decoded(n);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> x = normal_floats(n, rng, 0.5f);
    if (r % 3 == 2) {
      for (float& v : x) v = std::fabs(v) + 0.25f;  // one-signed rows exercise the mins
    }
    quantize_row(dtype, x.data(), w.bytes.data() + r * stride, n);
    dequantize_row(dtype, w.bytes.data() + r * stride, decoded.data(), n);
    double m = 0;
    for (int64_t i = 0; i < n; ++i) {
      w.values.push_back(decoded[i]);
      m = std::max(m, std::fabs(static_cast<double>(decoded[i])));
    }
    w.max_abs.push_back(m);
  }
  return w;
}

// Activation rows in the format the type's kernels take, plus their decoded values.
struct Activations {
  ActivationFormat format;
  size_t stride = 0;
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // [n_rows, n]
};

Activations make_activations(DType dtype, const std::vector<float>& x, int64_t n_rows, int64_t n) {
  Activations a;
  a.format = kernels::activation_format(dtype);
  a.stride = kernels::activation_row_bytes(a.format, n);
  a.bytes.resize(a.stride * n_rows);
  for (int64_t t = 0; t < n_rows; ++t) {
    uint8_t* row = a.bytes.data() + t * a.stride;
    const float* src = x.data() + t * n;
    if (a.format == ActivationFormat::kF32) {
      std::memcpy(row, src, n * sizeof(float));
      for (int64_t i = 0; i < n; ++i) a.values.push_back(src[i]);
    } else if (a.format == ActivationFormat::kQ8_0A) {
      auto* blocks = reinterpret_cast<BlockQ8_0A*>(row);
      quantize_row_q8_0a(src, blocks, n);
      for (int64_t i = 0; i < n; ++i) a.values.push_back(static_cast<double>(blocks[i / 32].d) * blocks[i / 32].qs[i % 32]);
    } else {
      auto* blocks = reinterpret_cast<BlockQ8_K*>(row);
      quantize_row_q8_k(src, blocks, n);
      for (int64_t i = 0; i < n; ++i) a.values.push_back(static_cast<double>(blocks[i / 256].d) * blocks[i / 256].qs[i % 256]);
    }
  }
  return a;
}

// Exact dot of decoded operands and the f32 error bound of a kernel computing it.
void reference_dot(DType dtype, const Weights& w, int64_t r, const Activations& a, int64_t t, int64_t n,
                   double* value, double* tol) {
  double sum = 0, magnitude = 0;
  const bool k_quant = dtype_info(dtype).block_size == 256;
  for (int64_t i = 0; i < n; ++i) {
    const double wi = w.values[r * n + i], ai = a.values[t * n + i];
    sum += wi * ai;
    magnitude += (std::fabs(wi) + (k_quant ? 2 * w.max_abs[r] : 0.0)) * std::fabs(ai);
  }
  const int64_t block = static_cast<int64_t>(dtype_info(dtype).block_size);
  const double ops = block == 1 ? static_cast<double>(n) : static_cast<double>(n / block) + 8;
  *value = sum;
  *tol = (ops + 8) * 2 * kEpsF32 * magnitude + 1e-30;
}

TEST(KernelDispatch, ParsesAndSelectsIsaLevels) {
  EXPECT_EQ(kernels::parse_cpu_isa("scalar"), CpuIsa::kScalar);
  EXPECT_EQ(kernels::parse_cpu_isa("avx2"), CpuIsa::kAvx2);
  EXPECT_EQ(kernels::parse_cpu_isa("avx512"), CpuIsa::kAvx512);
  EXPECT_EQ(kernels::parse_cpu_isa("avx512_vnni"), CpuIsa::kAvx512Vnni);
  EXPECT_EQ(kernels::parse_cpu_isa("avx512_bf16"), CpuIsa::kAvx512Bf16);
  EXPECT_EQ(kernels::parse_cpu_isa("amx"), CpuIsa::kAmx);
  EXPECT_FALSE(kernels::parse_cpu_isa("AVX2").has_value());
  EXPECT_EQ(kernels::select_cpu_isa("", CpuIsa::kAvx2), CpuIsa::kAvx2);
  EXPECT_EQ(kernels::select_cpu_isa("scalar", CpuIsa::kAvx2), CpuIsa::kScalar);
  EXPECT_EQ(kernels::select_cpu_isa("avx2", CpuIsa::kAvx512), CpuIsa::kAvx2);
  EXPECT_EQ(kernels::select_cpu_isa("avx512", CpuIsa::kAvx2), CpuIsa::kAvx2);  // not above the CPU
  EXPECT_EQ(kernels::select_cpu_isa("bogus", CpuIsa::kAvx2), CpuIsa::kAvx2);
}

TEST(KernelDispatch, PicksHighestFilledSlotAtOrBelowLevel) {
  const int scalar = 0, avx2 = 1;
  kernels::IsaSlots<int> slots;
  slots.by_level[0] = &scalar;
  EXPECT_EQ(kernels::pick_isa_slot(slots, CpuIsa::kAvx512Bf16), &scalar);
  slots.by_level[1] = &avx2;
  EXPECT_EQ(kernels::pick_isa_slot(slots, CpuIsa::kScalar), &scalar);
  EXPECT_EQ(kernels::pick_isa_slot(slots, CpuIsa::kAvx2), &avx2);
  EXPECT_EQ(kernels::pick_isa_slot(slots, CpuIsa::kAvx512Vnni), &avx2);  // empty AVX-512 slots
}

TEST(KernelDispatch, ActiveLevelFollowsCpuAndEnvironment) {
  const char* env = std::getenv("QS_CPU_ISA");
  const CpuIsa expected = kernels::select_cpu_isa(env ? env : "", kernels::detected_cpu_isa());
  EXPECT_EQ(kernels::active_cpu_isa(), expected);
  ASSERT_NE(kernels::dot_kernels_for(CpuIsa::kScalar), nullptr);
#if defined(__x86_64__)
  // The portable x86-64 build always carries the AVX2 path; it is live exactly when the CPU has it.
  EXPECT_EQ(kernels::dot_kernels_for(CpuIsa::kAvx2) != nullptr, kernels::cpu_has_isa(CpuIsa::kAvx2));
  if (kernels::cpu_has_isa(CpuIsa::kAvx2)) {
    EXPECT_EQ(kernels::dot_kernels_for(CpuIsa::kAvx2)->isa, CpuIsa::kAvx2);
  }
#endif
#if defined(__x86_64__)
  // The AVX-512 VNNI and AMX paths are built into the portable x86-64 binary too; live exactly when
  // the CPU (and, for AMX, the OS) has them.
  EXPECT_EQ(kernels::dot_kernels_for(CpuIsa::kAvx512Vnni) != nullptr, kernels::cpu_has_isa(CpuIsa::kAvx512Vnni));
  EXPECT_EQ(kernels::dot_kernels_for(CpuIsa::kAmx) != nullptr, kernels::cpu_has_isa(CpuIsa::kAmx));
#endif
  // The active table: the highest filled level at or below the active one (avx512 and avx512_bf16
  // have no table of their own).
  const auto at_most = [&](CpuIsa isa) { return static_cast<int>(isa) <= static_cast<int>(expected); };
  CpuIsa want = CpuIsa::kScalar;
  if (at_most(CpuIsa::kAvx2) && kernels::dot_kernels_for(CpuIsa::kAvx2) != nullptr) want = CpuIsa::kAvx2;
  if (at_most(CpuIsa::kAvx512Vnni) && kernels::dot_kernels_for(CpuIsa::kAvx512Vnni) != nullptr) {
    want = CpuIsa::kAvx512Vnni;
  }
  if (at_most(CpuIsa::kAmx) && kernels::dot_kernels_for(CpuIsa::kAmx) != nullptr) want = CpuIsa::kAmx;
  EXPECT_EQ(kernels::active_dot_kernels().isa, want);
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx512Bf16}) {
    EXPECT_EQ(kernels::dot_kernels_for(isa), nullptr) << kernels::cpu_isa_name(isa);
  }
}

TEST(KernelRowDot, EveryTypeAndIsaMatchesFloat64OfDecodedOperands) {
  std::mt19937 rng(301);
  for (const DotKernels* k : available_kernels()) {
    for (DType dtype : kAllTypes) {
      for (int64_t n : lengths_for(dtype)) {
        const int64_t rows = 3, tokens = 17;
        const Weights w = make_weights(dtype, rows, n, rng);
        const std::vector<float> x = normal_floats(tokens * n, rng, 1.0f);
        const Activations a = make_activations(dtype, x, tokens, n);
        const kernels::RowDotFn dot = k->row_dot(dtype);
        const size_t stride = row_bytes(dtype, n);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> single(tokens);
          for (int64_t t = 0; t < tokens; ++t) {
            dot(n, w.bytes.data() + r * stride, a.bytes.data() + t * a.stride, a.stride, 1, &single[t]);
            double ref, tol;
            reference_dot(dtype, w, r, a, t, n, &ref, &tol);
            ASSERT_LE(std::fabs(single[t] - ref), tol)
                << kernels::cpu_isa_name(k->isa) << " " << dtype_name(dtype) << " n=" << n << " row " << r;
          }
          // Any number of activation rows at once gives each row's single result, bit for bit.
          for (int n_act = 1; n_act <= tokens; n_act += (n_act < 5 ? 1 : 6)) {
            std::vector<float> group(n_act);
            dot(n, w.bytes.data() + r * stride, a.bytes.data(), a.stride, n_act, group.data());
            for (int t = 0; t < n_act; ++t) {
              ASSERT_EQ(bits_of(group[t]), bits_of(single[t]))
                  << kernels::cpu_isa_name(k->isa) << " " << dtype_name(dtype) << " n_act=" << n_act;
            }
          }
        }
      }
    }
  }
}

TEST(KernelRowDot, FloatWeightsAtOddAddresses) {
  std::mt19937 rng(302);
  for (const DotKernels* k : available_kernels()) {
    for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
      const int64_t n = 37;
      const Weights w = make_weights(dtype, 1, n, rng);
      std::vector<uint8_t> shifted(w.bytes.size() + 1);
      std::memcpy(shifted.data() + 1, w.bytes.data(), w.bytes.size());
      const std::vector<float> x = normal_floats(n, rng, 1.0f);
      float aligned = 0, odd = 0;
      k->row_dot(dtype)(n, w.bytes.data(), x.data(), 0, 1, &aligned);
      k->row_dot(dtype)(n, shifted.data() + 1, x.data(), 0, 1, &odd);
      EXPECT_EQ(bits_of(aligned), bits_of(odd)) << dtype_name(dtype);
    }
  }
}

TEST(KernelRowDot, ExtremeQuantsDoNotSaturate) {
  // Q8_0 weights of -128 and activations of +-127 are the largest int8 products maddubs sees.
  const int64_t n = 64;
  std::vector<uint8_t> w(row_bytes(DType::Q8_0, n));
  for (int b = 0; b < 2; ++b) {
    BlockQ8_0 block;
    block.d = fp32_to_fp16(1.0f);
    for (int i = 0; i < 32; ++i) block.qs[i] = -128;
    std::memcpy(w.data() + b * sizeof block, &block, sizeof block);
  }
  std::vector<BlockQ8_0A> a(2);
  for (auto& blk : a) {
    blk.d = 1.0f;
    for (int i = 0; i < 32; ++i) blk.qs[i] = static_cast<int8_t>(i % 2 ? 127 : -127);
  }
  a[1].qs[0] = 127;  // 17 x (+127) and 15 x (-127) in block 1
  for (const DotKernels* k : available_kernels()) {
    float out = 0;
    k->q8_0(n, w.data(), a.data(), sizeof(BlockQ8_0A), 1, &out);
    EXPECT_EQ(out, -128.0f * 127.0f * 2.0f) << kernels::cpu_isa_name(k->isa);
  }
}

TEST(KernelMatmulQ8_0, ExtremeQuantsThroughTheBatchPathMatchSingleTokens) {
  // The batch GEMM applies the weight sign to the activations by XOR and adds the |w| of the
  // negative weights back; weights of -128 / -127 / 127 / 0 against activations of +-127 are the
  // extreme maddubs pair sums there (-32768 .. 32512). 17 tokens: the batch path, incl. a tail.
  const int64_t in = 96, out = 11, tokens = 17;
  std::mt19937 rng(306);
  std::vector<uint8_t> w(row_bytes(DType::Q8_0, in) * out);
  const int8_t levels[] = {-128, -127, 127, 0, -1, 1};
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t b = 0; b < in / 32; ++b) {
      BlockQ8_0 block;
      block.d = fp32_to_fp16(r % 3 == 0 ? 1.0f : 0.5f);
      for (int i = 0; i < 32; ++i) {
        // Row 0: all -128; row 1: all 127; others: runs of one level and random mixes.
        block.qs[i] = r == 0 ? -128 : r == 1 ? 127 : r < 5 ? levels[(i / 8 + r + b) % 6] : levels[rng() % 6];
      }
      std::memcpy(w.data() + (r * (in / 32) + b) * sizeof block, &block, sizeof block);
    }
  }
  std::vector<float> x(tokens * in);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < in; ++i) {
      // +-1 everywhere (quantized to +-127), with sign patterns that align with the weight signs
      // (t = 0: all +, t = 1: all -) or not.
      const bool neg = t == 0 ? false : t == 1 ? true : (rng() % 2 == 0);
      x[t * in + i] = neg ? -1.0f : 1.0f;
    }
  }
  TensorView view;
  view.name = "extreme.weight";
  view.dtype = DType::Q8_0;
  view.shape = {out, in};
  view.data = w.data();
  view.size_bytes = w.size();
  ThreadPool pool(2);
  kernels::MatmulScratch scratch(2, in, 64);
  for (const DotKernels* k : available_kernels()) {
    std::vector<float> batch(tokens * out), single(tokens * out);
    kernels::matmul_with(*k, view, x.data(), tokens, batch.data(), pool, scratch);
    for (int64_t t = 0; t < tokens; ++t) {
      kernels::matmul_with(*k, view, x.data() + t * in, 1, single.data() + t * out, pool, scratch);
    }
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < out; ++r) {
        double ref = 0;  // activations are exactly +-127 * (1/127)
        for (int64_t i = 0; i < in; ++i) {
          const auto& block = reinterpret_cast<const BlockQ8_0*>(w.data())[r * (in / 32) + i / 32];
          ref += static_cast<double>(fp16_to_fp32(block.d)) * block.qs[i % 32] * (x[t * in + i] > 0 ? 1 : -1);
        }
        ASSERT_EQ(bits_of(batch[t * out + r]), bits_of(single[t * out + r]))
            << kernels::cpu_isa_name(k->isa) << " token " << t << " row " << r;
        ASSERT_NEAR(single[t * out + r], ref, 1e-5 * (std::fabs(ref) + 128)) << kernels::cpu_isa_name(k->isa);
      }
    }
  }
}

TEST(KernelQuantizeActivations, EveryIsaBitIdenticalToReference) {
  std::mt19937 rng(303);
  const int64_t n = 1024;
  std::vector<float> x = normal_floats(n, rng, 3.0f);
  for (int64_t i = 256; i < 288; ++i) x[i] = 0.0f;  // an all-zero block
  x[5] = 0.5f * (x[6] = 127.0f);                  // exact ties at .5 steps
  std::vector<BlockQ8_0A> ref_a(n / 32), got_a(n / 32);
  std::vector<BlockQ8_K> ref_k(n / 256), got_k(n / 256);
  quantize_row_q8_0a(x.data(), ref_a.data(), n);
  quantize_row_q8_k(x.data(), ref_k.data(), n);
  for (const DotKernels* k : available_kernels()) {
    k->quantize_q8_0a(x.data(), got_a.data(), n);
    k->quantize_q8_k(x.data(), got_k.data(), n);
    EXPECT_EQ(std::memcmp(ref_a.data(), got_a.data(), n / 32 * sizeof(BlockQ8_0A)), 0) << kernels::cpu_isa_name(k->isa);
    EXPECT_EQ(std::memcmp(ref_k.data(), got_k.data(), n / 256 * sizeof(BlockQ8_K)), 0) << kernels::cpu_isa_name(k->isa);
  }
}

TensorView view_of(const std::vector<uint8_t>& bytes, DType dtype, int64_t out, int64_t in) {
  TensorView v;
  v.name = "test.weight";
  v.dtype = dtype;
  v.shape = {out, in};
  v.data = bytes.data();
  v.size_bytes = bytes.size();
  return v;
}

TEST(KernelMatmulAllTypes, MatchesReferenceAndIsInvariantToBatchingThreadsAndChunks) {
  std::mt19937 rng(304);
  ThreadPool pool1(1), pool3(3);
  for (const DotKernels* k : available_kernels()) {
    for (DType dtype : kAllTypes) {
      const int64_t block = static_cast<int64_t>(dtype_info(dtype).block_size);
      const int64_t in = block == 1 ? 67 : 2 * block;
      for (int64_t out : {1, 17, 33}) {
        const int64_t max_tokens = 17;
        const Weights w = make_weights(dtype, out, in, rng);
        const TensorView view = view_of(w.bytes, dtype, out, in);
        const std::vector<float> x = normal_floats(max_tokens * in, rng, 1.0f);
        const Activations a = make_activations(dtype, x, max_tokens, in);
        const std::vector<float> bias = normal_floats(out, rng, 1.0f);
        kernels::MatmulScratch big(3, in, 64), small(3, in, 5);  // small: chunks of 5 tokens
        std::vector<float> single(max_tokens * out);
        for (int64_t t = 0; t < max_tokens; ++t) {
          kernels::matmul_with(*k, view, x.data() + t * in, 1, single.data() + t * out, pool1, big,
                               bias.data());
          for (int64_t r = 0; r < out; ++r) {
            double ref, tol;
            reference_dot(dtype, w, r, a, t, in, &ref, &tol);
            ASSERT_LE(std::fabs(single[t * out + r] - (ref + bias[r])), tol + 2 * kEpsF32 * std::fabs(ref + bias[r]))
                << kernels::cpu_isa_name(k->isa) << " " << dtype_name(dtype) << " out=" << out;
          }
        }
        for (int64_t n_tokens : {1, 2, 7, 16, 17}) {
          for (ThreadPool* pool : {&pool1, &pool3}) {
            for (kernels::MatmulScratch* scratch : {&big, &small}) {
              std::vector<float> y(n_tokens * out, NAN);
              kernels::matmul_with(*k, view, x.data(), n_tokens, y.data(), *pool, *scratch, bias.data());
              for (size_t e = 0; e < y.size(); ++e) {
                ASSERT_EQ(bits_of(y[e]), bits_of(single[e]))
                    << kernels::cpu_isa_name(k->isa) << " " << dtype_name(dtype) << " out=" << out
                    << " n_tokens=" << n_tokens << " threads=" << pool->n_threads();
              }
            }
          }
        }
      }
    }
  }
}

TEST(KernelMatmulAllTypes, SimdPathsAgreeWithScalarWithinRounding) {
  const DotKernels* avx2 = kernels::dot_kernels_for(CpuIsa::kAvx2);
  if (avx2 == nullptr) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(305);
  ThreadPool pool(2);
  for (DType dtype : kAllTypes) {
    const int64_t in = 2560, out = 40, tokens = 3;
    const Weights w = make_weights(dtype, out, in, rng);
    const TensorView view = view_of(w.bytes, dtype, out, in);
    const std::vector<float> x = normal_floats(tokens * in, rng, 1.0f);
    const Activations a = make_activations(dtype, x, tokens, in);
    kernels::MatmulScratch scratch(2, in, 16);
    std::vector<float> ys(tokens * out), yv(tokens * out);
    kernels::matmul_with(kernels::scalar_dot_kernels(), view, x.data(), tokens, ys.data(), pool, scratch);
    kernels::matmul_with(*avx2, view, x.data(), tokens, yv.data(), pool, scratch);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < out; ++r) {
        double ref, tol;
        reference_dot(dtype, w, r, a, t, in, &ref, &tol);
        ASSERT_LE(std::fabs(ys[t * out + r] - yv[t * out + r]), 2 * tol) << dtype_name(dtype);
      }
    }
  }
}

}  // namespace
}  // namespace qs
