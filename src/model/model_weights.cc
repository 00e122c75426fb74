#include "model/model_weights.h"

#include <cstdio>

#include "core/error.h"

namespace qs {

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

namespace {

// One row of the declarative tensor table: where a tensor lives in each naming scheme.
struct TensorName {
  const char* gguf;  // "%d" is the layer index
  const char* hf;
};

constexpr TensorName kEmbed = {"token_embd.weight", "model.embed_tokens.weight"};
constexpr TensorName kFinalNorm = {"output_norm.weight", "model.norm.weight"};
constexpr TensorName kLmHead = {"output.weight", "lm_head.weight"};
constexpr TensorName kAttnNorm = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"};
constexpr TensorName kQ = {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"};
constexpr TensorName kK = {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"};
constexpr TensorName kV = {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"};
constexpr TensorName kO = {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"};
constexpr TensorName kQBias = {"blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias"};
constexpr TensorName kKBias = {"blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias"};
constexpr TensorName kVBias = {"blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias"};
constexpr TensorName kQNorm = {"blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight"};
constexpr TensorName kKNorm = {"blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight"};
constexpr TensorName kFfnNorm = {"blk.%d.ffn_norm.weight",
                                 "model.layers.%d.post_attention_layernorm.weight"};
constexpr TensorName kGate = {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"};
constexpr TensorName kUp = {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"};
constexpr TensorName kDown = {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"};

class Binder {
 public:
  Binder(TensorNaming naming, const TensorLookup& lookup, const std::string& source)
      : naming_(naming), lookup_(lookup), source_(source) {}

  std::string name_of(const TensorName& name, int layer) const {
    const char* pattern = naming_ == TensorNaming::kGguf ? name.gguf : name.hf;
    char buffer[160];
    std::snprintf(buffer, sizeof buffer, pattern, layer);
    return buffer;
  }

  const TensorView* find(const TensorName& name, int layer = 0) const {
    return lookup_(name_of(name, layer));
  }

  const TensorView* require(const TensorName& name, std::vector<int64_t> expected_shape,
                            int layer = 0) const {
    const std::string tensor_name = name_of(name, layer);
    const TensorView* t = lookup_(tensor_name);
    if (t == nullptr) throw Error(source_ + ": missing tensor '" + tensor_name + "'");
    if (t->shape != expected_shape) {
      throw Error(source_ + ": tensor '" + tensor_name + "' has shape " +
                  shape_to_string(t->shape) + ", expected " + shape_to_string(expected_shape) +
                  " from the config");
    }
    if (expected_shape.size() == 1 && t->dtype != DType::F32 && t->dtype != DType::F16 &&
        t->dtype != DType::BF16) {
      throw Error(source_ + ": tensor '" + tensor_name + "' has type " +
                  std::string(dtype_name(t->dtype)) + ", expected F32, F16 or BF16 for a vector");
    }
    return t;
  }

 private:
  TensorNaming naming_;
  const TensorLookup& lookup_;
  const std::string& source_;
};

LayerWeights bind_layer(const ModelConfig& c, const Binder& b, int layer) {
  LayerWeights w;
  const int64_t hidden = c.hidden_size;
  w.attn_norm = b.require(kAttnNorm, {hidden}, layer);
  w.q_proj = b.require(kQ, {c.q_dim(), hidden}, layer);
  w.k_proj = b.require(kK, {c.kv_dim(), hidden}, layer);
  w.v_proj = b.require(kV, {c.kv_dim(), hidden}, layer);
  w.o_proj = b.require(kO, {hidden, c.q_dim()}, layer);
  if (c.has_qkv_bias()) {
    w.q_bias = b.require(kQBias, {c.q_dim()}, layer);
    w.k_bias = b.require(kKBias, {c.kv_dim()}, layer);
    w.v_bias = b.require(kVBias, {c.kv_dim()}, layer);
  }
  if (c.has_qk_norm()) {
    w.q_norm = b.require(kQNorm, {c.head_dim}, layer);
    w.k_norm = b.require(kKNorm, {c.head_dim}, layer);
  }
  w.ffn_norm = b.require(kFfnNorm, {hidden}, layer);
  w.gate_proj = b.require(kGate, {c.intermediate_size, hidden}, layer);
  w.up_proj = b.require(kUp, {c.intermediate_size, hidden}, layer);
  w.down_proj = b.require(kDown, {hidden, c.intermediate_size}, layer);
  return w;
}

}  // namespace

ModelWeights bind_model_weights(const ModelConfig& config, TensorNaming naming,
                                const TensorLookup& lookup, const std::string& source) {
  const Binder binder(naming, lookup, source);
  ModelWeights weights;
  weights.embed_tokens = binder.require(kEmbed, {config.vocab_size, config.hidden_size});
  for (int layer = 0; layer < config.num_hidden_layers; ++layer) {
    weights.layers.push_back(bind_layer(config, binder, layer));
  }
  weights.final_norm = binder.require(kFinalNorm, {config.hidden_size});
  if (config.tie_word_embeddings && binder.find(kLmHead) == nullptr) {
    weights.lm_head = weights.embed_tokens;
  } else {
    weights.lm_head = binder.require(kLmHead, {config.vocab_size, config.hidden_size});
  }
  return weights;
}

}  // namespace qs
