// Operation counts behind `qwenserve bench`'s GFLOP/s column.
#pragma once

#include <cstdint>

#include "model/model_config.h"

namespace qs::cli {

/// Floating-point operations of one ppN forward pass (multiply-add = 2): 2 N P for the N tokens
/// through the layers' matrices (P = their weights per layer times the layers; Kaplan et al. 2020's
/// 2 N P), 2 V H for the last token's logits, and causal attention, 4 L n_heads head_dim
/// N (N + 1) / 2 (QK^T and PV over the positions each token sees). Norms, RoPE and SiLU are left out.
inline double prompt_flops(const ModelConfig& c, int64_t n) {
  const double hidden = static_cast<double>(c.hidden_size);
  const double per_layer = hidden * static_cast<double>(c.q_dim() + 2 * c.kv_dim()) +
                           static_cast<double>(c.q_dim()) * hidden + 3.0 * hidden * static_cast<double>(c.intermediate_size);
  const double layers = static_cast<double>(c.num_hidden_layers);
  const double tokens = static_cast<double>(n);
  return 2.0 * tokens * layers * per_layer + 2.0 * static_cast<double>(c.vocab_size) * hidden +
         4.0 * layers * static_cast<double>(c.q_dim()) * tokens * (tokens + 1.0) / 2.0;
}

}  // namespace qs::cli
