// Views of every weight tensor of a Qwen3 / Qwen2 decoder, bound by name and checked against the
// config. The views point into memory-mapped files; nothing is copied.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "model/model_config.h"

namespace qs {

struct LayerWeights {
  const TensorView* attn_norm = nullptr;  // [hidden] input_layernorm
  const TensorView* q_proj = nullptr;     // [n_heads * head_dim, hidden]
  const TensorView* k_proj = nullptr;     // [n_kv_heads * head_dim, hidden]
  const TensorView* v_proj = nullptr;     // [n_kv_heads * head_dim, hidden]
  const TensorView* o_proj = nullptr;     // [hidden, n_heads * head_dim]
  const TensorView* q_bias = nullptr;     // [n_heads * head_dim]   Qwen2 only
  const TensorView* k_bias = nullptr;     // [n_kv_heads * head_dim] Qwen2 only
  const TensorView* v_bias = nullptr;     // [n_kv_heads * head_dim] Qwen2 only
  const TensorView* q_norm = nullptr;     // [head_dim] Qwen3 only
  const TensorView* k_norm = nullptr;     // [head_dim] Qwen3 only
  const TensorView* ffn_norm = nullptr;   // [hidden] post_attention_layernorm
  const TensorView* gate_proj = nullptr;  // [intermediate, hidden]
  const TensorView* up_proj = nullptr;    // [intermediate, hidden]
  const TensorView* down_proj = nullptr;  // [hidden, intermediate]
};

struct ModelWeights {
  const TensorView* embed_tokens = nullptr;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  const TensorView* final_norm = nullptr;    // [hidden]
  const TensorView* lm_head = nullptr;       // [vocab, hidden]; == embed_tokens when tied
};

/// Naming scheme of the file the tensors come from.
enum class TensorNaming { kGguf, kHuggingFace };

/// Looks a tensor up by its file name; returns nullptr when absent.
using TensorLookup = std::function<const TensorView*(const std::string& name)>;

/// Binds every tensor the architecture needs and checks its shape against `config`. 1-D tensors
/// (norms, biases) must be F32/F16/BF16. Throws qs::Error "<source>: missing tensor 'name'" or
/// "<source>: tensor 'name' has shape [a, b], expected [c, d] from the config".
ModelWeights bind_model_weights(const ModelConfig& config, TensorNaming naming,
                                const TensorLookup& lookup, const std::string& source);

/// "[a, b, c]".
std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace qs
