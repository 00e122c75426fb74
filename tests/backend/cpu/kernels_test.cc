// CPU kernels against plain float64 references written here: dot products, matmul over every
// supported weight type, RMSNorm, RoPE, SwiGLU, and paged attention over the KV cache.
//
// Tolerances are error bounds derived from the data (u = 2^-24, the binary32 unit roundoff):
// a length-n f32 dot product is within n * 2u * sum|a_i b_i| of the exact value, and so on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "formats/dtype.h"
#include "core/error.h"
#include "formats/tensor.h"
#include "core/thread_pool.h"
#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kernels/norm_rope.h"
#include "backend/cpu/kernels/paged_attention.h"
#include "backend/cpu/kernels/vec_dot.h"
#include "backend/cpu/kv_storage.h"
#include "model/model_config.h"
#include "formats/quantize.h"

namespace qs {
namespace {

constexpr double kU = 0x1p-24;        // binary32 unit roundoff
constexpr double kEpsF32 = 0x1p-23;   // FLT_EPSILON
constexpr double kU16 = 0x1p-11;      // binary16 unit roundoff

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
// binary16 conversions independent of formats/dtype.cc: gcc's _Float16 (libgcc's soft-float
// routines); with clang 14 (the sanitizer build), which lowers __fp16 conversions on x86 to
// compiler-rt's __gnu_f2h_ieee / __gnu_h2f_ieee that its link does not include, the F16C
// instructions (the same IEEE binary16 conversion, round to nearest even, in hardware).
#if defined(__clang__) && defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t to_half(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float from_half(uint16_t bits) { return _cvtsh_ss(bits); }
#else
uint16_t to_half(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}
float from_half(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, sizeof h);
  return static_cast<float>(h);
}
#endif

std::vector<float> random_floats(size_t n, std::mt19937& rng, float std_dev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, std_dev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ---------------------------------------------------------------------------------------------
// dot_f32 / dot4_f32

std::vector<int64_t> dot_lengths() {
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 40; ++n) lengths.push_back(n);
  for (int64_t n : {63, 64, 65, 255, 1000, 4099, 65537}) lengths.push_back(n);
  return lengths;
}

TEST(KernelDot, MatchesFloat64ForAllLengthsAndMisalignedPointers) {
  std::mt19937 rng(11);
  const int64_t max_n = 65537;
  const std::vector<float> a = random_floats(max_n + 8, rng);
  const std::vector<float> b = random_floats(max_n + 8, rng);
  for (int64_t n : dot_lengths()) {
    for (int off_a = 0; off_a < 8; ++off_a) {
      const int off_b = (off_a * 3 + 1) % 8;
      const float* pa = a.data() + off_a;
      const float* pb = b.data() + off_b;
      double exact = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        exact += static_cast<double>(pa[i]) * pb[i];
        magnitude += std::fabs(static_cast<double>(pa[i]) * pb[i]);
      }
      const double got = kernels::dot_f32(pa, pb, n);
      const double tol = static_cast<double>(n) * kEpsF32 * magnitude;
      ASSERT_LE(std::fabs(got - exact), tol) << "n=" << n << " offsets " << off_a << "," << off_b;
    }
  }
}

TEST(KernelDot, HandlesCancellationWithinBound) {
  // Large terms that cancel: the bound is relative to sum|a_i b_i|, not to the result.
  std::vector<float> a = {1e8f, 1.0f, -1e8f, 3.0f, 1e4f, -1e4f, 0.5f, 2.0f, 7.0f};
  std::vector<float> b = {1.0f, 1.0f, 1.0f, 1.0f, 1e4f, 1e4f, 0.25f, -1.0f, 1.0f};
  double exact = 0.0, magnitude = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    exact += static_cast<double>(a[i]) * b[i];
    magnitude += std::fabs(static_cast<double>(a[i]) * b[i]);
  }
  const double got = kernels::dot_f32(a.data(), b.data(), static_cast<int64_t>(a.size()));
  EXPECT_LE(std::fabs(got - exact), a.size() * kEpsF32 * magnitude);
}

TEST(KernelDot, Dot4IsBitIdenticalToDotPerRow) {
  std::mt19937 rng(12);
  const int64_t max_n = 65537;
  const std::vector<float> x = random_floats(max_n + 8, rng);
  const std::vector<float> w = random_floats(4 * (max_n + 8), rng);
  for (int64_t n : dot_lengths()) {
    for (int off = 0; off < 8; ++off) {
      const float* xp = x.data() + off;
      // Rows at different misalignments within one buffer.
      const float* rows[4] = {w.data() + (off + 1) % 8, w.data() + (max_n + 8) + (off + 3) % 8,
                              w.data() + 2 * (max_n + 8) + (off + 5) % 8,
                              w.data() + 3 * (max_n + 8) + (off + 6) % 8};
      float out[4];
      kernels::dot4_f32(xp, rows, n, out);
      for (int r = 0; r < 4; ++r) {
        const float single = kernels::dot_f32(xp, rows[r], n);
        ASSERT_EQ(bits_of(out[r]), bits_of(single)) << "n=" << n << " off=" << off << " row " << r;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// matmul

// A weight matrix built by the test, with its exact dequantized values in double.
struct TestWeight {
  DType dtype;
  int64_t out = 0, in = 0;
  std::vector<uint8_t> bytes;
  std::vector<double> values;  // [out * in]

  TensorView view(size_t byte_offset = 0) const {
    TensorView v;
    v.name = "test.weight";
    v.dtype = dtype;
    v.shape = {out, in};
    v.data = bytes.data() + byte_offset;
    v.size_bytes = bytes.size() - byte_offset;
    return v;
  }
};

TestWeight make_weight(DType dtype, int64_t out, int64_t in, std::mt19937& rng) {
  TestWeight w;
  w.dtype = dtype;
  w.out = out;
  w.in = in;
  std::normal_distribution<float> normal(0.0f, 0.5f);
  auto put = [&w](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    w.bytes.insert(w.bytes.end(), b, b + n);
  };
  for (int64_t r = 0; r < out; ++r) {
    if (dtype == DType::Q8_0) {
      // GGUF spec block_q8_0: f16 scale d (little-endian), then 32 int8 quants; x = d * q.
      std::uniform_real_distribution<float> scale(0.001f, 0.02f);
      std::uniform_int_distribution<int> quant(-128, 127);
      for (int64_t blk = 0; blk < in / 32; ++blk) {
        const uint16_t d = to_half(blk % 3 == 1 ? -scale(rng) : scale(rng));
        const uint8_t d_le[2] = {static_cast<uint8_t>(d & 0xff), static_cast<uint8_t>(d >> 8)};
        put(d_le, 2);
        for (int i = 0; i < 32; ++i) {
          const int8_t q = static_cast<int8_t>(quant(rng));
          put(&q, 1);
          w.values.push_back(static_cast<double>(from_half(d)) * q);
        }
      }
      continue;
    }
    for (int64_t i = 0; i < in; ++i) {
      const float v = normal(rng);
      if (dtype == DType::F32) {
        put(&v, 4);
        w.values.push_back(v);
      } else if (dtype == DType::F16) {
        const uint16_t h = to_half(v);
        put(&h, 2);
        w.values.push_back(from_half(h));
      } else {  // BF16: the upper half of the binary32 pattern is a valid bfloat16
        const uint16_t b = static_cast<uint16_t>(bits_of(v) >> 16);
        put(&b, 2);
        w.values.push_back(float_of(static_cast<uint32_t>(b) << 16));
      }
    }
  }
  return w;
}

// y[t, r] = sum_i x[t, i] * W[r, i] (+ bias[r]) in double, and the error bound of an f32 evaluation.
void reference_matmul(const TestWeight& w, const std::vector<float>& x, int64_t n_tokens,
                      const float* bias, std::vector<double>* y, std::vector<double>* tol) {
  y->assign(static_cast<size_t>(n_tokens * w.out), 0.0);
  tol->assign(y->size(), 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < w.out; ++r) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < w.in; ++i) {
        const double p = static_cast<double>(x[t * w.in + i]) * w.values[r * w.in + i];
        sum += p;
        magnitude += std::fabs(p);
      }
      if (bias != nullptr) {
        sum += bias[r];
        magnitude += std::fabs(static_cast<double>(bias[r]));
      }
      // in products and sums, one dequantization rounding (Q8_0), one bias addition.
      (*y)[t * w.out + r] = sum;
      (*tol)[t * w.out + r] = static_cast<double>(w.in + 3) * kEpsF32 * magnitude;
      if (w.dtype == DType::Q8_0) {
        // Q8_0 weights are dotted with int8 activations: each x[t, i] moves by at most half its
        // block's step max|x_block| / 127 (quantize_row_q8_0a).
        for (int64_t i = 0; i < w.in; ++i) {
          double amax = 0.0;
          for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) {
            amax = std::max(amax, std::fabs(static_cast<double>(x[t * w.in + j])));
          }
          (*tol)[t * w.out + r] += std::fabs(w.values[r * w.in + i]) * amax / 254.0 * (1 + 1e-5);
        }
      }
    }
  }
}

TEST(KernelMatmul, MatchesFloat64ForAllTypesAndIsBatchAndThreadInvariant) {
  std::mt19937 rng(21);
  const int64_t max_in = 128;
  ThreadPool pool1(1);
  ThreadPool pool3(3);
  kernels::MatmulScratch scratch(3, max_in);
  const int64_t token_counts[] = {1, 2, 5};
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    const std::vector<int64_t> ins = dtype == DType::Q8_0 ? std::vector<int64_t>{32, 96, 128}
                                                          : std::vector<int64_t>{1, 7, 32, 100};
    for (int64_t out : {1, 3, 17, 33, 50}) {
      for (int64_t in : ins) {
        const TestWeight w = make_weight(dtype, out, in, rng);
        const TensorView view = w.view();
        const std::vector<float> x = random_floats(static_cast<size_t>(5 * in), rng);
        const std::vector<float> bias_values = random_floats(static_cast<size_t>(out), rng);
        for (const float* bias : {static_cast<const float*>(nullptr), bias_values.data()}) {
          // Per-token results computed alone on one thread: every other configuration must
          // reproduce them bit for bit.
          std::vector<float> single(static_cast<size_t>(5 * out));
          for (int64_t t = 0; t < 5; ++t) {
            kernels::matmul(view, x.data() + t * in, 1, single.data() + t * out, pool1, scratch, bias);
          }
          std::vector<double> ref, tol;
          reference_matmul(w, x, 5, bias, &ref, &tol);
          for (size_t k = 0; k < single.size(); ++k) {
            ASSERT_LE(std::fabs(single[k] - ref[k]), tol[k])
                << dtype_name(dtype) << " out=" << out << " in=" << in << " element " << k
                << (bias ? " with bias" : "");
          }
          for (int64_t n_tokens : token_counts) {
            for (ThreadPool* pool : {&pool1, &pool3}) {
              std::vector<float> y(static_cast<size_t>(n_tokens * out), NAN);
              kernels::matmul(view, x.data(), n_tokens, y.data(), *pool, scratch, bias);
              for (size_t k = 0; k < y.size(); ++k) {
                ASSERT_EQ(bits_of(y[k]), bits_of(single[k]))
                    << dtype_name(dtype) << " out=" << out << " in=" << in << " n_tokens=" << n_tokens
                    << " threads=" << pool->n_threads() << " element " << k;
              }
            }
          }
        }
      }
    }
  }
}

TEST(KernelMatmul, UnalignedF32WeightsGiveSameBits) {
  std::mt19937 rng(22);
  const int64_t out = 19, in = 37;
  TestWeight w = make_weight(DType::F32, out, in, rng);
  TestWeight shifted = w;
  shifted.bytes.insert(shifted.bytes.begin(), 0xAB);  // rows now start at an odd address
  const std::vector<float> x = random_floats(static_cast<size_t>(3 * in), rng);
  ThreadPool pool(3);
  kernels::MatmulScratch scratch(3, in);
  std::vector<float> y_aligned(3 * out), y_shifted(3 * out);
  kernels::matmul(w.view(), x.data(), 3, y_aligned.data(), pool, scratch);
  kernels::matmul(shifted.view(1), x.data(), 3, y_shifted.data(), pool, scratch);
  for (size_t k = 0; k < y_aligned.size(); ++k) EXPECT_EQ(bits_of(y_aligned[k]), bits_of(y_shifted[k]));
}

TEST(KernelMatmul, RejectsUnsupportedTypeAndTooWideWeights) {
  std::mt19937 rng(23);
  ThreadPool pool1(1);
  kernels::MatmulScratch scratch(1, 64);
  std::vector<float> x(256, 1.0f), y(256);

  TestWeight unknown;
  unknown.dtype = static_cast<DType>(99);  // not a type qwenserve knows
  unknown.out = 2;
  unknown.in = 32;
  unknown.bytes.assign(2 * 34, 0);
  EXPECT_THROW(kernels::matmul(unknown.view(), x.data(), 1, y.data(), pool1, scratch), Error);

  const TestWeight wide = make_weight(DType::F32, 2, 65, rng);
  EXPECT_THROW(kernels::matmul(wide.view(), x.data(), 1, y.data(), pool1, scratch), Error);

  const TestWeight ok = make_weight(DType::F32, 2, 64, rng);
  EXPECT_NO_THROW(kernels::matmul(ok.view(), x.data(), 1, y.data(), pool1, scratch));
}

// ---------------------------------------------------------------------------------------------
// RMSNorm, RoPE, SwiGLU

TEST(KernelRmsNorm, MatchesFloat64Formula) {
  std::mt19937 rng(31);
  for (int64_t n : {1, 7, 64, 1024}) {
    for (float x_scale : {1e-3f, 1.0f, 300.0f}) {
      for (double eps : {1e-6, 1e-5}) {
        const std::vector<float> x = random_floats(static_cast<size_t>(n), rng, x_scale);
        const std::vector<float> weight = random_floats(static_cast<size_t>(n), rng);
        double sum_sq = 0.0;
        for (float v : x) sum_sq += static_cast<double>(v) * v;
        const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
        std::vector<float> out(static_cast<size_t>(n));
        kernels::rms_norm(x.data(), weight.data(), n, eps, out.data());
        std::vector<float> in_place = x;
        kernels::rms_norm(in_place.data(), weight.data(), n, eps, in_place.data());
        for (int64_t i = 0; i < n; ++i) {
          const double expected = static_cast<double>(x[i]) * inv_rms * weight[i];
          // The f32 scale, x * scale and * weight: three roundings.
          const double tol = 4.0 * kU * std::fabs(expected) + 1e-30;
          ASSERT_LE(std::fabs(out[i] - expected), tol) << "n=" << n << " i=" << i;
          ASSERT_EQ(bits_of(in_place[i]), bits_of(out[i])) << "aliasing changes the result";
        }
      }
    }
  }
}

TEST(KernelRmsNorm, ZeroRowStaysZero) {
  std::vector<float> x(16, 0.0f), w(16, 1.5f), out(16, 7.0f);
  kernels::rms_norm(x.data(), w.data(), 16, 1e-6, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(KernelRope, MatchesComplexRotationInFloat64) {
  std::mt19937 rng(41);
  const int64_t n_heads = 3;
  for (int64_t d : {2, 64, 128}) {
    for (double theta : {1e4, 1e6, 5e6}) {
      for (int64_t pos : {0, 1, 2, 17, 1000, 32767, 40960, 100000, 1000000}) {
        std::vector<float> cos_sin(static_cast<size_t>(d));
        kernels::rope_cos_sin(pos, d, theta, cos_sin.data());
        const std::vector<float> x = random_floats(static_cast<size_t>(n_heads * d), rng, 2.0f);
        std::vector<float> y = x;
        kernels::rope_neox(y.data(), n_heads, d, cos_sin.data());
        const int64_t half = d / 2;
        // Error of the angle itself (|angle| <= pos) in double, a few ulps.
        const double angle_err = 8.0 * static_cast<double>(pos) * 0x1p-52;
        for (int64_t i = 0; i < half; ++i) {
          // inv_freq = theta^(-2i/d), written as exp(-(2i/d) ln theta).
          const double angle =
              static_cast<double>(pos) * std::exp(-2.0 * static_cast<double>(i) / d * std::log(theta));
          ASSERT_LE(std::fabs(cos_sin[i] - std::cos(angle)), kU + angle_err) << "cos i=" << i;
          ASSERT_LE(std::fabs(cos_sin[half + i] - std::sin(angle)), kU + angle_err) << "sin i=" << i;
          for (int64_t h = 0; h < n_heads; ++h) {
            const double a = x[h * d + i], b = x[h * d + i + half];
            // (a + ib) * e^{i angle}
            const double re = a * std::cos(angle) - b * std::sin(angle);
            const double im = a * std::sin(angle) + b * std::cos(angle);
            // f32 cos/sin (u + angle error each), two products and one sum (3u of |a| + |b|).
            const double tol = (4.0 * kU + angle_err) * (std::fabs(a) + std::fabs(b));
            ASSERT_LE(std::fabs(y[h * d + i] - re), tol)
                << "d=" << d << " theta=" << theta << " pos=" << pos << " head " << h << " i=" << i;
            ASSERT_LE(std::fabs(y[h * d + i + half] - im), tol)
                << "d=" << d << " theta=" << theta << " pos=" << pos << " head " << h << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(KernelRope, PositionZeroIsIdentity) {
  std::mt19937 rng(42);
  std::vector<float> cos_sin(64);
  kernels::rope_cos_sin(0, 64, 1e6, cos_sin.data());
  const std::vector<float> x = random_floats(4 * 64, rng);
  std::vector<float> y = x;
  kernels::rope_neox(y.data(), 4, 64, cos_sin.data());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(bits_of(y[i]), bits_of(x[i]));
}

TEST(KernelSiluMul, MatchesFloat64) {
  std::mt19937 rng(51);
  std::uniform_real_distribution<float> wide(-80.0f, 80.0f);
  std::vector<float> gate = random_floats(2000, rng, 4.0f);
  for (int i = 0; i < 500; ++i) gate.push_back(wide(rng));
  for (float g : {0.0f, -0.0f, 1e-30f, -1e-30f, 1.0f, -1.0f, 20.0f, -20.0f, 80.0f, -80.0f}) {
    gate.push_back(g);
  }
  const std::vector<float> up = random_floats(gate.size(), rng);
  std::vector<float> out = gate;
  kernels::silu_mul(out.data(), up.data(), static_cast<int64_t>(out.size()));
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double expected = g / (1.0 + std::exp(-g)) * up[i];
    // exp (expf <= 1 ulp; the AVX2 polynomial ~3.4 ulps), 1 + e, the division and the products:
    // a few roundings, relative.
    const double tol = 8.0 * kU * std::fabs(expected) + 1e-37;
    ASSERT_LE(std::fabs(out[i] - expected), tol) << "g=" << gate[i] << " up=" << up[i];
  }
}

TEST(KernelSiluMul, SaturatesForLargeMagnitudes) {
  std::vector<float> gate = {1000.0f, -1000.0f, 200.0f, -200.0f};
  const std::vector<float> up = {2.0f, 2.0f, -1.0f, -1.0f};
  kernels::silu_mul(gate.data(), up.data(), 4);
  EXPECT_EQ(gate[0], 2000.0f);
  EXPECT_LE(std::fabs(gate[1]), 1e-37f);  // exact value -1000 e^-1000 * 2 is below f32 range
  EXPECT_EQ(gate[2], -200.0f);
  EXPECT_LE(std::fabs(gate[3]), 1e-37f);
  for (float v : gate) EXPECT_FALSE(std::isnan(v));
}

// ---------------------------------------------------------------------------------------------
// Paged attention

ModelConfig attention_config() {
  ModelConfig config;
  config.hidden_size = 512;
  config.intermediate_size = 1024;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 8;
  config.num_key_value_heads = 2;
  config.head_dim = 64;
  config.vocab_size = 100;
  config.max_position_embeddings = 4096;
  return config;
}

class KernelPagedAttention : public ::testing::TestWithParam<KvDType> {};

TEST_P(KernelPagedAttention, MatchesFloat64SoftmaxAttentionOverNonContiguousBlocks) {
  const KvDType kv_dtype = GetParam();
  const DType element = kv_element_type(kv_dtype);
  const ModelConfig config = attention_config();
  const int64_t n_heads = 8, n_kv = 2, d = 64, group = n_heads / n_kv;
  const int64_t max_context = 40;
  const int64_t layer = 1;
  CpuKvStorage cache(config, kv_dtype, 8);
  const std::vector<int32_t> block_table = {5, 2, 7};
  const size_t row_size = row_bytes(element, d);
  ASSERT_EQ(cache.layer(layer).row_bytes, row_size);
  // The storage is not initialised: zero it so that untouched blocks can be checked below.
  const size_t layer_bytes = static_cast<size_t>(8) * n_kv * 16 * row_size;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    std::memset(cache.layer(l).k, 0, layer_bytes);
    std::memset(cache.layer(l).v, 0, layer_bytes);
  }

  std::mt19937 rng(61);
  std::vector<float> k = random_floats(static_cast<size_t>(max_context * n_kv * d), rng);
  std::vector<float> v = random_floats(static_cast<size_t>(max_context * n_kv * d), rng);
  // Different data in the other layer, at the same positions: must not leak into layer 1.
  const std::vector<float> other = random_floats(static_cast<size_t>(n_kv * d), rng, 100.0f);
  for (int64_t p = 0; p < max_context; ++p) {
    const int32_t slot = block_table[p / 16] * 16 + static_cast<int32_t>(p % 16);
    kernels::kv_store(cache.layer(layer), slot, k.data() + p * n_kv * d, v.data() + p * n_kv * d);
    kernels::kv_store(cache.layer(0), slot, other.data(), other.data());
  }

  // Stored rows sit where the block table says (block bt[p / 16], row p % 16) and hold the
  // reference encoding of the input (quant/quantize.h, itself checked against the format in
  // quant_test). From here on the reference attention uses the decoded stored values, so the
  // kernel's only error is its f32 arithmetic.
  const auto* k_base = cache.layer(layer).k;
  const auto* v_base = cache.layer(layer).v;
  std::vector<uint8_t> expected_row(row_size);
  for (int64_t p = 0; p < max_context; ++p) {
    for (int64_t g = 0; g < n_kv; ++g) {
      const size_t row = ((static_cast<size_t>(block_table[p / 16]) * n_kv + g) * 16 + p % 16) * row_size;
      for (auto [base, values] : {std::pair{k_base, &k}, std::pair{v_base, &v}}) {
        float* x = values->data() + (p * n_kv + g) * d;
        quantize_row(element, x, expected_row.data(), d);
        ASSERT_EQ(std::memcmp(base + row, expected_row.data(), row_size), 0)
            << dtype_name(element) << " position " << p << " head " << g;
        dequantize_row(element, base + row, x, d);
      }
    }
  }
  // Blocks outside the table are untouched (zeroed above).
  for (int32_t block : {0, 1, 3, 4, 6}) {
    const size_t begin = static_cast<size_t>(block) * n_kv * 16 * row_size;
    for (size_t byte = 0; byte < static_cast<size_t>(n_kv * 16) * row_size; ++byte) {
      ASSERT_EQ(k_base[begin + byte], 0) << "block " << block;
      ASSERT_EQ(v_base[begin + byte], 0) << "block " << block;
    }
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(d));

  for (int64_t n_context : {1, 15, 16, 17, 40}) {
    const std::vector<float> q = random_floats(static_cast<size_t>(n_heads * d), rng, 2.0f);
    std::vector<float> out(static_cast<size_t>(n_heads * d), NAN);
    kernels::paged_attention_token(q.data(), {n_heads, n_kv, d}, cache.layer(layer), block_table.data(),
                                   n_context, out.data());
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / group;  // GQA: consecutive query heads share a KV head
      std::vector<double> s(static_cast<size_t>(n_context));
      double s_max = -INFINITY, s_abs_max = 0.0, score_err = 0.0;
      for (int64_t j = 0; j < n_context; ++j) {
        const float* kj = k.data() + (j * n_kv + g) * d;
        double dot = 0.0, magnitude = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          dot += static_cast<double>(q[h * d + i]) * kj[i];
          magnitude += std::fabs(static_cast<double>(q[h * d + i]) * kj[i]);
        }
        s[j] = dot * scale;
        s_max = std::max(s_max, s[j]);
        s_abs_max = std::max(s_abs_max, std::fabs(s[j]));
        // Cached-K error, f32 dot of length d, the scale multiplication.
        score_err = std::max(score_err, scale * d * kEpsF32 * magnitude +
                                            kU * std::fabs(s[j]));
      }
      // exp(s_j - max) in f32: the subtraction and the kernel's exp (relative error < 2^-22 by
      // its contract) add a relative error to each weight; the online rescaling by
      // exp(old_max - new_max) adds one more exp and multiplication per KV block.
      const double n_blocks = static_cast<double>((n_context + 15) / 16);
      score_err += 2.0 * kU * s_abs_max + (1.0 + n_blocks) * (0x1p-22 + kU);
      std::vector<double> p(static_cast<size_t>(n_context));
      double denom = 0.0;
      for (int64_t j = 0; j < n_context; ++j) denom += p[j] = std::exp(s[j] - s_max);
      for (double& pj : p) pj /= denom;
      // Scores off by at most E each move every softmax weight by a factor within e^{+-2E}.
      const double weight_rel = std::expm1(2.0 * score_err);
      for (int64_t i = 0; i < d; ++i) {
        double expected = 0.0, magnitude = 0.0;
        for (int64_t j = 0; j < n_context; ++j) {
          const double vj = v[(j * n_kv + g) * d + i];
          expected += p[j] * vj;
          magnitude += p[j] * std::fabs(vj);
        }
        // Weight errors, cached-V errors, f32 accumulation over n_context terms and normalisation.
        const double tol = (weight_rel + 2.0 * (n_context + 4) * kEpsF32) * magnitude;
        const double got = out[h * d + i];
        ASSERT_LE(std::fabs(got - expected), tol)
            << dtype_name(element) << " n_context=" << n_context << " head " << h << " i=" << i
            << " expected " << expected;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernel, KernelPagedAttention,
                         ::testing::Values(KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kQ8_0),
                         [](const ::testing::TestParamInfo<KvDType>& info) {
                           return std::string(dtype_name(kv_element_type(info.param)));
                         });

// kv_store with a head range writes exactly those KV heads' rows, each with the reference encoding
// of formats/ (quantize_row), and leaves every other byte as it was.
TEST(KernelKvStore, HeadRangeWritesOnlyThoseHeadsWithTheReferenceEncoding) {
  const ModelConfig config = attention_config();
  const int64_t n_kv = 2, d = 64;
  for (KvDType kv_type : {KvDType::kF16, KvDType::kQ8_0}) {
    CpuKvStorage cache(config, kv_type, 4);
    const kernels::KvLayerView layer = cache.layer(1);
    const size_t layer_bytes = static_cast<size_t>(4) * n_kv * 16 * layer.row_bytes;
    std::memset(layer.k, 0xAB, layer_bytes);
    std::memset(layer.v, 0xAB, layer_bytes);
    std::mt19937 rng(63);
    const std::vector<float> k = random_floats(static_cast<size_t>(n_kv * d), rng);
    const std::vector<float> v = random_floats(static_cast<size_t>(n_kv * d), rng);
    const int32_t slot = 2 * 16 + 5;  // block 2, row 5
    kernels::kv_store(layer, slot, k.data(), v.data(), 1, 2);
    std::vector<uint8_t> expect(layer.row_bytes);
    for (auto [base, values] : {std::pair{layer.k, &k}, std::pair{layer.v, &v}}) {
      const size_t written = layer.row_offset(2, 1, 5);
      quantize_row(layer.element_type, values->data() + d, expect.data(), d);
      EXPECT_EQ(std::memcmp(base + written, expect.data(), layer.row_bytes), 0) << dtype_name(layer.element_type);
      for (size_t i = 0; i < layer_bytes; ++i) {
        if (i >= written && i < written + layer.row_bytes) continue;
        ASSERT_EQ(base[i], 0xAB) << dtype_name(layer.element_type) << " byte " << i << " changed";
      }
    }
    // Head 0 next: the same slot now holds both heads as one full store would write them.
    kernels::kv_store(layer, slot, k.data(), v.data(), 0, 1);
    for (int64_t g = 0; g < n_kv; ++g) {
      quantize_row(layer.element_type, k.data() + g * d, expect.data(), d);
      EXPECT_EQ(std::memcmp(layer.k + layer.row_offset(2, g, 5), expect.data(), layer.row_bytes), 0) << g;
    }
  }
}

// A head range outside the layer's KV heads is refused before anything is written (the parts of a
// head-split attention region pass their own ranges; a wrong one must not write past a row).
TEST(KernelKvStore, HeadRangeOutsideTheLayerThrowsAndWritesNothing) {
  const ModelConfig config = attention_config();  // 2 KV heads
  CpuKvStorage cache(config, KvDType::kF16, 4);
  const kernels::KvLayerView layer = cache.layer(0);
  const size_t layer_bytes = static_cast<size_t>(4) * layer.n_kv_heads * 16 * layer.row_bytes;
  std::memset(layer.k, 0xAB, layer_bytes);
  const std::vector<float> k(static_cast<size_t>(4 * 64), 1.0f), v = k;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 3}, {-1, 1}, {2, 1}, {3, -1}}) {
    EXPECT_THROW(kernels::kv_store(layer, 5, k.data(), v.data(), begin, end), Error) << begin << ", " << end;
  }
  for (size_t i = 0; i < layer_bytes; ++i) ASSERT_EQ(layer.k[i], 0xAB) << "byte " << i;
  EXPECT_NO_THROW(kernels::kv_store(layer, 5, k.data(), v.data(), 2, 2));  // empty range: nothing to do
}

TEST(KernelPagedAttentionSingleKey, OneKeyReturnsItsValue) {
  // With one key the softmax weight is exactly 1: the output is the (cached) value row.
  const ModelConfig config = attention_config();
  CpuKvStorage cache(config, KvDType::kF32, 4);
  const std::vector<int32_t> block_table = {3};
  std::mt19937 rng(62);
  const std::vector<float> k = random_floats(2 * 64, rng), v = random_floats(2 * 64, rng);
  kernels::kv_store(cache.layer(0), 3 * 16, k.data(), v.data());
  const std::vector<float> q = random_floats(8 * 64, rng, 10.0f);
  std::vector<float> out(8 * 64);
  kernels::paged_attention_token(q.data(), {8, 2, 64}, cache.layer(0), block_table.data(), 1, out.data());
  for (int64_t h = 0; h < 8; ++h) {
    for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(out[h * 64 + i], v[(h / 4) * 64 + i]);
  }
}

}  // namespace
}  // namespace qs
