// The CUDA backend's kernels against float64 references on random inputs with odd shapes
// (backend/cuda/device_ops.h). Compiled only in builds with CUDA; every test is skipped (not
// failed) when no CUDA device answers.
#if defined(QS_HAVE_CUDA)

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_ops.h"
#include "formats/dtype.h"

namespace qs {
namespace {

#define SKIP_WITHOUT_DEVICE() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

std::vector<float> random_vector(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

float bf16_round(float x) { return bf16_to_fp32(fp32_to_bf16(x)); }

double rel_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

TEST(CudaKernels, RmsNormMatchesFloat64) {
  SKIP_WITHOUT_DEVICE();
  for (int hidden : {1, 33, 2560}) {
    const int rows = 7;
    const auto x = random_vector(static_cast<size_t>(rows) * hidden, hidden);
    const auto w = random_vector(hidden, hidden + 1);
    const auto got = cuda_ops::rms_norm(x, w, rows, hidden, 1e-6f);
    std::vector<double> ref(x.size());
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < hidden; ++i) ss += double(x[r * hidden + i]) * x[r * hidden + i];
      const double inv = 1.0 / std::sqrt(ss / hidden + 1e-6);
      for (int i = 0; i < hidden; ++i) ref[r * hidden + i] = x[r * hidden + i] * inv * w[i];
    }
    EXPECT_LT(rel_l2(got, ref), 8e-3) << "hidden " << hidden;  // bf16 output: 2^-9 per element
  }
}

TEST(CudaKernels, SiluMulMatchesFloat64) {
  SKIP_WITHOUT_DEVICE();
  const int tokens = 5, inter = 301;
  const auto gu = random_vector(static_cast<size_t>(tokens) * 2 * inter, 3, 3.0f);
  const auto got = cuda_ops::silu_mul(gu, tokens, inter);
  std::vector<double> ref(static_cast<size_t>(tokens) * inter);
  for (int t = 0; t < tokens; ++t) {
    for (int i = 0; i < inter; ++i) {
      const double g = gu[t * 2 * inter + i], u = gu[t * 2 * inter + inter + i];
      ref[t * inter + i] = g / (1 + std::exp(-g)) * u;
    }
  }
  EXPECT_LT(rel_l2(got, ref), 8e-3);
}

TEST(CudaKernels, GemmMatchesFloat64OnBf16Inputs) {
  SKIP_WITHOUT_DEVICE();
  for (auto [n, k, t] : {std::tuple{1, 8, 1}, std::tuple{257, 96, 3}, std::tuple{96, 2560, 17}}) {
    const auto w = random_vector(static_cast<size_t>(n) * k, n + k);
    const auto x = random_vector(static_cast<size_t>(t) * k, t + k);
    const auto got = cuda_ops::gemm(w, x, n, k, t);
    std::vector<double> ref(static_cast<size_t>(t) * n);
    for (int i = 0; i < t; ++i) {
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int c = 0; c < k; ++c) s += double(bf16_round(x[i * k + c])) * bf16_round(w[j * k + c]);
        ref[i * n + j] = s;
      }
    }
    EXPECT_LT(rel_l2(got, ref), 1e-5) << n << "x" << k << "x" << t;  // f32 accumulation
  }
}

// Causal GQA attention over a paged f32 cache: contexts not a multiple of 16, a padding token
// (context 0), splits that are empty for short contexts.
TEST(CudaKernels, PagedAttentionMatchesFloat64) {
  SKIP_WITHOUT_DEVICE();
  const int n_heads = 8, n_kv = 2, n_blocks = 12;
  for (int head_dim : {64, 128}) {
    const std::vector<int32_t> ctx = {1, 17, 33, 100, 0};  // token t's context; the last is padding
    const std::vector<int32_t> token_seq = {0, 1, 1, 2, 0};
    const int max_blocks = 7;
    // Sequence 0: blocks {3}; 1: {0, 5, 9}; 2: {1, 2, 4, 6, 7, 8, 10}.
    std::vector<int32_t> tables = {3, -1, -1, -1, -1, -1, -1, 0, 5, 9, -1, -1, -1, -1, 1, 2, 4, 6, 7, 8, 10};
    const int n_tokens = static_cast<int>(ctx.size());
    const size_t cache = static_cast<size_t>(n_blocks) * n_kv * 16 * head_dim;
    const auto k = random_vector(cache, 11 + head_dim), v = random_vector(cache, 12 + head_dim);
    const auto q = random_vector(static_cast<size_t>(n_tokens) * n_heads * head_dim, 13 + head_dim);
    std::vector<double> ref(q.size(), 0.0);
    const double scale = 1.0 / std::sqrt(double(head_dim));
    for (int t = 0; t < n_tokens; ++t) {
      for (int h = 0; h < n_heads; ++h) {
        const int kvh = h / (n_heads / n_kv);
        std::vector<double> s(ctx[t]);
        double mx = -INFINITY;
        for (int p = 0; p < ctx[t]; ++p) {
          const int blk = tables[token_seq[t] * max_blocks + p / 16];
          const float* kr = &k[((size_t(blk) * n_kv + kvh) * 16 + p % 16) * head_dim];
          double dot = 0;
          for (int d = 0; d < head_dim; ++d) dot += double(bf16_round(q[(t * n_heads + h) * head_dim + d])) * kr[d];
          s[p] = dot * scale;
          mx = std::max(mx, s[p]);
        }
        double z = 0;
        for (double& x : s) z += (x = std::exp(x - mx));
        for (int p = 0; p < ctx[t]; ++p) {
          const int blk = tables[token_seq[t] * max_blocks + p / 16];
          const float* vr = &v[((size_t(blk) * n_kv + kvh) * 16 + p % 16) * head_dim];
          for (int d = 0; d < head_dim; ++d) ref[(t * n_heads + h) * head_dim + d] += s[p] / z * vr[d];
        }
      }
    }
    for (auto [splits, per_split] : {std::pair{1, 7}, std::pair{4, 2}, std::pair{7, 1}}) {
      const auto got = cuda_ops::paged_attention(q, k, v, token_seq, ctx, tables, max_blocks, n_tokens, n_heads,
                                                 n_kv, head_dim, splits, per_split);
      EXPECT_LT(rel_l2(got, ref), 8e-3) << "head_dim " << head_dim << " splits " << splits;
      for (int i = 0; i < n_heads * head_dim; ++i) {
        ASSERT_EQ(got[(n_tokens - 1) * n_heads * head_dim + i], 0.0f) << "padding token writes zeros";
      }
    }
  }
}

TEST(CudaKernels, GreedySamplingIsArgmaxWithLowestIdOnTies) {
  SKIP_WITHOUT_DEVICE();
  const int vocab = 151936, rows = 3;
  auto logits = random_vector(static_cast<size_t>(rows) * vocab, 21);
  logits[0 * vocab + 5000] = 50.0f;
  logits[1 * vocab + 77] = 60.0f;
  logits[1 * vocab + 70000] = 60.0f;  // tie: lower id wins
  logits[2 * vocab + vocab - 1] = 70.0f;
  const auto got = cuda_ops::sample(logits, rows, vocab, 0.0f, 0, 1.0f, 0.0f, 1, 0);
  EXPECT_EQ(got, (std::vector<int32_t>{5000, 77, vocab - 1}));
  const auto top1 = cuda_ops::sample(logits, rows, vocab, 1.0f, 1, 1.0f, 0.0f, 1, 0);  // top_k 1 = greedy
  EXPECT_EQ(top1, got);
}

TEST(CudaKernels, SeededSamplingRepeatsAndRespectsCutoffs) {
  SKIP_WITHOUT_DEVICE();
  const int vocab = 1000, rows = 4;
  const auto logits = random_vector(static_cast<size_t>(rows) * vocab, 31, 2.0f);
  // Same (seed, draws): same tokens; the draw number changes the stream.
  EXPECT_EQ(cuda_ops::sample(logits, rows, vocab, 1.0f, 0, 1.0f, 0.0f, 9, 4),
            cuda_ops::sample(logits, rows, vocab, 1.0f, 0, 1.0f, 0.0f, 9, 4));
  // top_k = 3: every draw is one of the row's three largest logits.
  for (uint64_t draw = 0; draw < 20; ++draw) {
    const auto ids = cuda_ops::sample(logits, rows, vocab, 1.0f, 3, 1.0f, 0.0f, 5, draw);
    for (int r = 0; r < rows; ++r) {
      int larger = 0;
      for (int i = 0; i < vocab; ++i) larger += logits[r * vocab + i] > logits[r * vocab + ids[r]] ? 1 : 0;
      EXPECT_LT(larger, 3) << "row " << r << " draw " << draw;
    }
  }
  // One token with probability ~0.9: top_p 0.5 and min_p 0.5 keep only it.
  std::vector<float> peaked(vocab, 0.0f);
  peaked[123] = std::log(9.0f * (vocab - 1));
  for (uint64_t draw = 0; draw < 10; ++draw) {
    EXPECT_EQ(cuda_ops::sample(peaked, 1, vocab, 1.0f, 0, 0.5f, 0.0f, 3, draw)[0], 123);
    EXPECT_EQ(cuda_ops::sample(peaked, 1, vocab, 1.0f, 0, 1.0f, 0.5f, 3, draw)[0], 123);
  }
}

}  // namespace
}  // namespace qs

#endif  // QS_HAVE_CUDA
