// Test helper: a small random-weight Qwen3 / Qwen2 model held in memory (no files), for tests
// of the forward pass and the engine that need a model but not a reference.
#pragma once

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/tensor.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace qs {

// A random Qwen3-shaped model held in memory (tensors own their bytes).
struct RandomModel {
  // vocab 300, hidden 64, 2 layers, 4 heads / 2 KV heads; weights ~N(0, 1/8) so outputs vary.
  ModelConfig config;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> buffers;
  std::vector<std::unique_ptr<TensorView>> views;
  ModelWeights weights;

  const TensorView* make(std::vector<int64_t> shape, DType dtype, std::mt19937& rng, float std_dev,
                         float mean = 0.0f) {
    auto view = std::make_unique<TensorView>();
    view->shape = shape;
    view->dtype = dtype;
    view->name = "t" + std::to_string(views.size());
    const int64_t n = view->n_elements();
    auto bytes = std::make_unique<std::vector<uint8_t>>(row_bytes(dtype, n));
    std::normal_distribution<float> dist(mean, std_dev);
    for (int64_t i = 0; i < n; ++i) {
      const float v = dist(rng);
      if (dtype == DType::F32) {
        std::memcpy(bytes->data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = fp32_to_fp16(v);
        std::memcpy(bytes->data() + 2 * i, &h, 2);
      }
    }
    view->data = bytes->data();
    view->size_bytes = bytes->size();
    buffers.push_back(std::move(bytes));
    views.push_back(std::move(view));
    return views.back().get();
  }

  // `seed`: another seed gives another model of the same shape (e.g. a poor draft model).
  RandomModel(Architecture arch, DType dtype, uint32_t seed = 1234) {
    config.arch = arch;
    config.hidden_size = 64;
    config.intermediate_size = 96;
    config.num_hidden_layers = 2;
    config.num_attention_heads = 4;
    config.num_key_value_heads = 2;
    config.head_dim = arch == Architecture::kQwen3 ? 32 : 16;
    config.vocab_size = 300;
    config.max_position_embeddings = 256;
    config.tie_word_embeddings = true;
    std::mt19937 rng(seed);
    const float s = 0.125f;  // ~1/sqrt(hidden): varied outputs on a tiny model
    weights.embed_tokens = make({config.vocab_size, config.hidden_size}, dtype, rng, s);
    for (int l = 0; l < config.num_hidden_layers; ++l) {
      LayerWeights w;
      w.attn_norm = make({config.hidden_size}, DType::F32, rng, 0.1f, 1.0f);
      w.q_proj = make({config.q_dim(), config.hidden_size}, dtype, rng, s);
      w.k_proj = make({config.kv_dim(), config.hidden_size}, dtype, rng, s);
      w.v_proj = make({config.kv_dim(), config.hidden_size}, dtype, rng, s);
      w.o_proj = make({config.hidden_size, config.q_dim()}, dtype, rng, s);
      if (config.has_qk_norm()) {
        w.q_norm = make({config.head_dim}, DType::F32, rng, 0.1f, 1.0f);
        w.k_norm = make({config.head_dim}, DType::F32, rng, 0.1f, 1.0f);
      } else {
        w.q_bias = make({config.q_dim()}, DType::F32, rng, 0.1f);
        w.k_bias = make({config.kv_dim()}, DType::F32, rng, 0.1f);
        w.v_bias = make({config.kv_dim()}, DType::F32, rng, 0.1f);
      }
      w.ffn_norm = make({config.hidden_size}, DType::F32, rng, 0.1f, 1.0f);
      w.gate_proj = make({config.intermediate_size, config.hidden_size}, dtype, rng, s);
      w.up_proj = make({config.intermediate_size, config.hidden_size}, dtype, rng, s);
      w.down_proj = make({config.hidden_size, config.intermediate_size}, dtype, rng, 0.1f);
      weights.layers.push_back(w);
    }
    weights.final_norm = make({config.hidden_size}, DType::F32, rng, 0.1f, 1.0f);
    weights.lm_head = weights.embed_tokens;
  }
};

}  // namespace qs
