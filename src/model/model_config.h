// Hyper-parameters of a Qwen3 / Qwen2(.5) decoder, read from GGUF metadata or HF config.json.
//
// Field names follow Hugging Face's config.json (Qwen3Config / Qwen2Config in transformers).
#pragma once

#include <cstdint>
#include <string>

namespace qs {

class GgufFile;

enum class Architecture {
  kQwen3,  // q/k RMSNorm over head_dim, no q/k/v bias (Qwen3ForCausalLM)
  kQwen2,  // q/k/v bias, no q/k norm (Qwen2ForCausalLM, also Qwen2.5)
};

std::string architecture_name(Architecture arch);

struct ModelConfig {
  Architecture arch = Architecture::kQwen3;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // Qwen3: from config; Qwen2: hidden_size / num_attention_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 1e6;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  bool has_qk_norm() const { return arch == Architecture::kQwen3; }
  bool has_qkv_bias() const { return arch == Architecture::kQwen2; }
  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }

  /// Checks positivity and divisibility (heads % kv heads, even head_dim for RoPE).
  /// Throws qs::Error "<source>: <field> ..." naming the offending field.
  void validate(const std::string& source) const;
};

/// Reads `{arch}.*` keys (arch = general.architecture, "qwen3" or "qwen2"). vocab_size comes from
/// the token embedding's row count when `{arch}.vocab_size` is absent. Throws qs::Error.
ModelConfig model_config_from_gguf(const GgufFile& gguf);

/// Parses a Hugging Face config.json. Throws qs::Error naming the file for malformed JSON,
/// missing fields, wrong types or unsupported model_type.
ModelConfig model_config_from_hf_json(const std::string& config_path);

}  // namespace qs
