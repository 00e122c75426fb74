#include "model/model_config.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "io/binary_cursor.h"
#include "io/gguf_reader.h"

namespace qs {

std::string architecture_name(Architecture arch) {
  return arch == Architecture::kQwen3 ? "qwen3" : "qwen2";
}

namespace {

// Largest accepted size of any one dimension (and of max_position_embeddings). Real models are far
// below it; the bound keeps every product of two sizes (q_dim, kv_dim, vocab * hidden ...) inside
// int64 so corrupt configs cannot overflow the shape arithmetic.
constexpr int64_t kMaxDimension = int64_t{1} << 31;

}  // namespace

void ModelConfig::validate(const std::string& source) const {
  auto require_positive = [&](int64_t value, const char* field) {
    if (value <= 0) {
      throw Error(source + ": " + field + " must be positive, got " + std::to_string(value));
    }
    if (value > kMaxDimension) {
      throw Error(source + ": " + field + " " + std::to_string(value) + " is too large (at most " +
                  std::to_string(kMaxDimension) + ")");
    }
  };
  require_positive(hidden_size, "hidden_size");
  require_positive(intermediate_size, "intermediate_size");
  require_positive(num_hidden_layers, "num_hidden_layers");
  require_positive(num_attention_heads, "num_attention_heads");
  require_positive(num_key_value_heads, "num_key_value_heads");
  require_positive(head_dim, "head_dim");
  require_positive(vocab_size, "vocab_size");
  require_positive(max_position_embeddings, "max_position_embeddings");
  if (num_attention_heads % num_key_value_heads != 0) {
    throw Error(source + ": num_attention_heads " + std::to_string(num_attention_heads) +
                " is not a multiple of num_key_value_heads " + std::to_string(num_key_value_heads));
  }
  if (head_dim % 2 != 0) throw Error(source + ": head_dim must be even for RoPE");
  if (!(rope_theta > 0)) throw Error(source + ": rope_theta must be positive");
  if (!(rms_norm_eps > 0)) throw Error(source + ": rms_norm_eps must be positive");
}

namespace {

// A size from GGUF metadata `key` (any unsigned integer type), 1 to kMaxDimension. Errors name the
// GGUF key, e.g. "m.gguf: metadata key 'qwen3.attention.head_count' must be positive, got 0".
int64_t gguf_size(const GgufFile& gguf, const std::string& key, std::optional<int64_t> fallback) {
  if (!gguf.has(key) && fallback) return *fallback;
  const uint64_t value = gguf.get_uint(key);  // throws when missing, negative or not an integer
  if (value == 0) throw Error(gguf.path() + ": metadata key '" + key + "' must be positive, got 0");
  if (value > static_cast<uint64_t>(kMaxDimension)) {
    throw Error(gguf.path() + ": metadata key '" + key + "' value " + std::to_string(value) +
                " is too large (at most " + std::to_string(kMaxDimension) + ")");
  }
  return static_cast<int64_t>(value);
}

}  // namespace

ModelConfig model_config_from_gguf(const GgufFile& gguf) {
  const std::string arch_name = gguf.get_string("general.architecture");
  ModelConfig config;
  if (arch_name == "qwen3") {
    config.arch = Architecture::kQwen3;
  } else if (arch_name == "qwen2") {
    config.arch = Architecture::kQwen2;
  } else {
    throw Error(gguf.path() + ": general.architecture '" + printable(arch_name) +
                "' is not supported (expected qwen3 or qwen2)");
  }
  const std::string p = arch_name + ".";
  config.hidden_size = gguf_size(gguf, p + "embedding_length", std::nullopt);
  config.intermediate_size = gguf_size(gguf, p + "feed_forward_length", std::nullopt);
  config.num_hidden_layers = gguf_size(gguf, p + "block_count", std::nullopt);
  config.num_attention_heads = gguf_size(gguf, p + "attention.head_count", std::nullopt);
  config.num_key_value_heads =
      gguf_size(gguf, p + "attention.head_count_kv", config.num_attention_heads);
  config.head_dim = gguf_size(gguf, p + "attention.key_length",
                              config.hidden_size / config.num_attention_heads);
  config.max_position_embeddings = gguf_size(gguf, p + "context_length", 32768);
  config.rope_theta = gguf.get_float_opt(p + "rope.freq_base").value_or(1e6);
  config.rms_norm_eps = gguf.get_float_opt(p + "attention.layer_norm_rms_epsilon").value_or(1e-6);
  config.tie_word_embeddings = gguf.find_tensor("output.weight") == nullptr;
  if (gguf.has(p + "vocab_size")) {
    config.vocab_size = gguf_size(gguf, p + "vocab_size", std::nullopt);
  } else if (const TensorView* embed = gguf.find_tensor("token_embd.weight")) {
    config.vocab_size = embed->shape.front();
  } else {
    throw Error(gguf.path() + ": missing tensor 'token_embd.weight'");
  }
  config.validate(gguf.path());
  return config;
}

namespace {

int64_t json_int(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) throw Error(path + ": missing field '" + key + "'");
  if (!j[key].is_number_integer()) throw Error(path + ": field '" + key + "' must be an integer");
  if (j[key].is_number_unsigned() &&
      j[key].get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(path + ": field '" + key + "' value " + std::to_string(j[key].get<uint64_t>()) +
                " is too large");
  }
  return j[key].get<int64_t>();
}

double json_number(const nlohmann::json& j, const char* key, double fallback,
                   const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) throw Error(path + ": field '" + key + "' must be a number");
  return j[key].get<double>();
}

}  // namespace

ModelConfig model_config_from_hf_json(const std::string& config_path) {
  std::ifstream in(config_path);
  if (!in) throw Error(config_path + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(config_path + ": malformed JSON: " + printable(e.what(), 400));
  }
  if (!j.is_object()) throw Error(config_path + ": expected a JSON object");
  if (j.contains("model_type") && !j["model_type"].is_string()) {
    throw Error(config_path + ": field 'model_type' must be a string");
  }
  const std::string model_type = j.value("model_type", std::string());
  ModelConfig config;
  if (model_type == "qwen3") {
    config.arch = Architecture::kQwen3;
  } else if (model_type == "qwen2") {
    config.arch = Architecture::kQwen2;
  } else {
    throw Error(config_path + ": model_type '" + printable(model_type) +
                "' is not supported (expected qwen3 or qwen2)");
  }
  config.hidden_size = json_int(j, "hidden_size", config_path);
  config.intermediate_size = json_int(j, "intermediate_size", config_path);
  config.num_hidden_layers = json_int(j, "num_hidden_layers", config_path);
  config.num_attention_heads = json_int(j, "num_attention_heads", config_path);
  config.num_key_value_heads = j.contains("num_key_value_heads")
                                   ? json_int(j, "num_key_value_heads", config_path)
                                   : config.num_attention_heads;
  config.head_dim = (j.contains("head_dim") && !j["head_dim"].is_null())
                        ? json_int(j, "head_dim", config_path)
                        : (config.num_attention_heads > 0
                               ? config.hidden_size / config.num_attention_heads
                               : 0);
  config.vocab_size = json_int(j, "vocab_size", config_path);
  config.max_position_embeddings =
      j.contains("max_position_embeddings") ? json_int(j, "max_position_embeddings", config_path)
                                            : 32768;
  config.rope_theta = json_number(j, "rope_theta", 1e6, config_path);
  config.rms_norm_eps = json_number(j, "rms_norm_eps", 1e-6, config_path);
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) {
      throw Error(config_path + ": field 'tie_word_embeddings' must be a boolean");
    }
    config.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  config.validate(config_path);
  return config;
}

}  // namespace qs
