// Model-level accuracy of the quantized weight types: a random Qwen3-shaped model (K-quant-sized:
// hidden 256, intermediate 512) is run in F32 and with its matrices stored as each type; logits
// must stay within a normalized RMS error derived from the measured quantization step of those
// weights and of the int8 activations, and, with peaked outputs (large embedding scale), top-1
// must agree on >= 98% of positions for Q8_0 and >= 90% for the Q4_K_M mix.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "core/thread_pool.h"
#include "backend/cpu/cpu_backend.h"
#include "support/backend_test_support.h"
#include "formats/quantize.h"

namespace qs {
namespace {

enum class Mix { kUniform, kQ4_K_M };

// The same f32 master weights stored with `dtype` (Q4_K_M: Q6_K for v_proj, down_proj and the
// embedding, Q4_K elsewhere, as llama.cpp's mix does). Also records the weights' relative RMS
// quantization error.
struct QuantModel {
  ModelConfig config;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> buffers;
  std::vector<std::unique_ptr<TensorView>> views;
  ModelWeights weights;
  double err2 = 0, ref2 = 0;

  const TensorView* make(std::vector<int64_t> shape, DType dtype, std::mt19937& rng, float sd, float mean = 0) {
    auto view = std::make_unique<TensorView>();
    view->shape = shape;
    view->dtype = shape.size() == 1 ? DType::F32 : dtype;
    view->name = "t" + std::to_string(views.size());
    const int64_t n = view->n_elements();
    std::normal_distribution<float> dist(mean, sd);
    std::vector<float> values(n), back(n);
    for (float& v : values) v = dist(rng);
    auto bytes = std::make_unique<std::vector<uint8_t>>(row_bytes(view->dtype, n));
    quantize_row(view->dtype, values.data(), bytes->data(), n);
    dequantize_row(view->dtype, bytes->data(), back.data(), n);
    for (int64_t i = 0; i < n && shape.size() == 2; ++i) {
      err2 += (back[i] - values[i]) * static_cast<double>(back[i] - values[i]);
      ref2 += values[i] * static_cast<double>(values[i]);
    }
    view->data = bytes->data();
    view->size_bytes = bytes->size();
    buffers.push_back(std::move(bytes));
    views.push_back(std::move(view));
    return views.back().get();
  }

  QuantModel(DType dtype, Mix mix, float embed_sd) {
    config.arch = Architecture::kQwen3;
    config.hidden_size = 256;
    config.intermediate_size = 512;
    config.num_hidden_layers = 2;
    config.num_attention_heads = 4;
    config.num_key_value_heads = 2;
    config.head_dim = 64;
    config.vocab_size = 320;
    config.max_position_embeddings = 256;
    config.tie_word_embeddings = true;
    const DType big = mix == Mix::kQ4_K_M ? DType::Q6_K : dtype;
    std::mt19937 rng(77);
    const float s = 0.0625f;  // 1 / sqrt(hidden)
    weights.embed_tokens = make({config.vocab_size, config.hidden_size}, big, rng, embed_sd);
    for (int l = 0; l < config.num_hidden_layers; ++l) {
      LayerWeights w;
      w.attn_norm = make({config.hidden_size}, dtype, rng, 0.1f, 1.0f);
      w.q_proj = make({config.q_dim(), config.hidden_size}, dtype, rng, s);
      w.k_proj = make({config.kv_dim(), config.hidden_size}, dtype, rng, s);
      w.v_proj = make({config.kv_dim(), config.hidden_size}, big, rng, s);
      w.o_proj = make({config.hidden_size, config.q_dim()}, dtype, rng, s);
      w.q_norm = make({config.head_dim}, dtype, rng, 0.1f, 1.0f);
      w.k_norm = make({config.head_dim}, dtype, rng, 0.1f, 1.0f);
      w.ffn_norm = make({config.hidden_size}, dtype, rng, 0.1f, 1.0f);
      w.gate_proj = make({config.intermediate_size, config.hidden_size}, dtype, rng, s);
      w.up_proj = make({config.intermediate_size, config.hidden_size}, dtype, rng, s);
      w.down_proj = make({config.hidden_size, config.intermediate_size}, big, rng, 0.044f);
      weights.layers.push_back(w);
    }
    weights.final_norm = make({config.hidden_size}, dtype, rng, 0.1f, 1.0f);
    weights.lm_head = weights.embed_tokens;
  }

  double weight_relative_rms_error() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0; }
};

std::vector<float> logits_of(QuantModel& m, const std::vector<int32_t>& ids) {
  CpuBackend backend(CpuBackendOptions{2, false, 0});
  backend.prepare(m.config, m.weights, BackendLimits{128, 256, 1});
  backend.allocate_kv(16, KvDType::kF32);
  const auto n = static_cast<int32_t>(ids.size());
  return step_logits(backend, {{ids, 0, block_range(0, (n + 15) / 16), n}});
}

struct Case {
  const char* name;
  DType dtype;
  Mix mix;
  bool int8_activations;
  double min_top1;  // required top-1 agreement with peaked outputs
};

class ModelQuantTest : public ::testing::TestWithParam<Case> {};

TEST_P(ModelQuantTest, LogitsWithinQuantizationBoundOfF32) {
  const Case c = GetParam();
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> token(0, 319);
  std::vector<int32_t> ids(96);
  for (int32_t& id : ids) id = token(rng);
  for (float embed_sd : {0.0625f, 1.0f}) {  // flat, then peaked output distributions
    QuantModel ref(DType::F32, Mix::kUniform, embed_sd);
    QuantModel q(c.dtype, c.mix, embed_sd);
    const std::vector<float> a = logits_of(ref, ids), b = logits_of(q, ids);
    const int64_t vocab = ref.config.vocab_size;
    double err2 = 0, ref2 = 0;
    int agree = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      int arg_a = 0, arg_b = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const double d = b[t * vocab + v] - a[t * vocab + v];
        err2 += d * d;
        ref2 += static_cast<double>(a[t * vocab + v]) * a[t * vocab + v];
        if (a[t * vocab + v] > a[t * vocab + arg_a]) arg_a = static_cast<int>(v);
        if (b[t * vocab + v] > b[t * vocab + arg_b]) arg_b = static_cast<int>(v);
      }
      agree += arg_a == arg_b;
    }
    const double nrmse = std::sqrt(err2 / ref2);
    // Each of the 2 x 7 + 1 matmuls on a token's path perturbs its output by about the weights'
    // relative RMS error (measured above) plus that of int8 activations (uniform rounding over a
    // step of max|x| / 127 per block, ~ max|x| / (127 sqrt 12) / rms(x) ~ 1/100 for Gaussian-like
    // rows); independent perturbations add in quadrature. Allow 3x for the nonlinear layers.
    const double eps_w = q.weight_relative_rms_error();
    const double eps_a = c.int8_activations ? 0.01 : 0.0;
    const double bound = 3.0 * std::sqrt(15.0) * std::sqrt(eps_w * eps_w + eps_a * eps_a) + 1e-6;
    EXPECT_LE(nrmse, bound) << c.name << " embed_sd " << embed_sd << " eps_w " << eps_w;
    if (embed_sd > 0.5f) {
      EXPECT_GE(static_cast<double>(agree) / ids.size(), c.min_top1) << c.name;
    }
    std::printf("[ %s ] embed_sd %.4f: weight rel. RMS error %.5f, logits NRMSE %.5f (bound %.5f), top-1 %d/%zu\n",
                c.name, embed_sd, eps_w, nrmse, bound, agree, ids.size());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Model, ModelQuantTest,
    ::testing::Values(Case{"F16", DType::F16, Mix::kUniform, false, 0.98},
                      Case{"BF16", DType::BF16, Mix::kUniform, false, 0.98},
                      Case{"Q8_0", DType::Q8_0, Mix::kUniform, true, 0.98},
                      Case{"Q4_0", DType::Q4_0, Mix::kUniform, true, 0.85},
                      Case{"Q6_K", DType::Q6_K, Mix::kUniform, true, 0.95},
                      Case{"Q5_K_M", DType::Q5_K, Mix::kQ4_K_M, true, 0.90},
                      Case{"Q4_K_M", DType::Q4_K, Mix::kQ4_K_M, true, 0.90}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace qs
