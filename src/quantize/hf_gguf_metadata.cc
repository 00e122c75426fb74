#include "quantize/hf_gguf_metadata.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf_writer.h"
#include "model/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace qs {
namespace fs = std::filesystem;
namespace {

constexpr int32_t kTokenNormal = 1, kTokenControl = 3, kTokenUserDefined = 4, kTokenUnused = 5;

// Per-layer tensors in converter order: {HF suffix after "model.layers.N.", GGUF suffix}.
constexpr std::array<std::pair<const char*, const char*>, 14> kLayerTensors = {{
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
}};

nlohmann::json read_json_or_empty(const fs::path& path) {
  if (!fs::exists(path)) return nlohmann::json::object();
  std::ifstream in(path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": malformed JSON: " + e.what());
  }
}

// llama.cpp treats these spellings as control tokens even when not marked special.
bool looks_special(const std::string& t) {
  auto wrapped = [&t](const std::string& open, const std::string& close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wrapped("<unused", ">");
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

void add_tokenizer(GgufWriter& w, const LoadedModel& model) {
  const fs::path dir(model.path);
  const TokenizerData data = load_tokenizer_json((dir / "tokenizer.json").string());
  const int64_t vocab = model.config.vocab_size;
  std::vector<std::string> tokens(static_cast<size_t>(vocab));
  std::vector<int32_t> types(static_cast<size_t>(vocab), kTokenNormal);
  for (int64_t i = 0; i < vocab; ++i) {
    const bool known = i < static_cast<int64_t>(data.vocab.size()) && !data.vocab[i].empty();
    tokens[i] = known ? data.vocab[i] : "[PAD" + std::to_string(i) + "]";
    if (!known) types[i] = kTokenUnused;
  }
  for (const AddedToken& t : data.added_tokens) {
    if (t.id < 0 || t.id >= vocab) continue;
    if (t.special || looks_special(t.content)) {
      tokens[t.id] = t.content;
      types[t.id] = kTokenControl;
    } else {
      tokens[t.id] = replace_all(t.content, "\xe2\x96\x81", " ");  // U+2581 -> space
      types[t.id] = kTokenUserDefined;
    }
  }
  std::vector<std::string> merges;
  merges.reserve(data.merges.size());
  for (const auto& [left, right] : data.merges) {  // a space inside a part is written as U+0120
    merges.push_back(replace_all(left, " ", "\xc4\xa0") + " " + replace_all(right, " ", "\xc4\xa0"));
  }
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "qwen2");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_int32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);

  // Ids from tokenizer_config.json first, config.json's bos/eos_token_id as the fallback.
  const nlohmann::json config = read_json_or_empty(dir / "config.json");
  auto config_id = [&config](const char* key) -> std::optional<int32_t> {
    if (config.contains(key) && config[key].is_number_integer()) return config[key].get<int32_t>();
    return std::nullopt;
  };
  const std::optional<int32_t> bos = data.bos_id ? data.bos_id : config_id("bos_token_id");
  const std::optional<int32_t> eos = data.eos_id ? data.eos_id : config_id("eos_token_id");
  for (const auto& [key, id] : {std::pair{"tokenizer.ggml.bos_token_id", bos},
                                std::pair{"tokenizer.ggml.eos_token_id", eos},
                                std::pair{"tokenizer.ggml.padding_token_id", data.pad_id}}) {
    if (id && *id >= 0 && *id < vocab) w.add_uint32(key, static_cast<uint32_t>(*id));
  }
  const nlohmann::json tok_config = read_json_or_empty(dir / "tokenizer_config.json");
  for (const char* key : {"add_bos_token", "add_eos_token"}) {
    if (tok_config.contains(key) && tok_config[key].is_boolean()) {
      w.add_bool(std::string("tokenizer.ggml.") + key, tok_config[key].get<bool>());
    }
  }
  if (!model.chat_template.empty()) w.add_string("tokenizer.chat_template", model.chat_template);
}

}  // namespace

void add_hf_gguf_metadata(GgufWriter& w, const LoadedModel& model) {
  const ModelConfig& c = model.config;
  const std::string arch = architecture_name(c.arch);
  const std::string name = fs::path(model.path).lexically_normal().filename().string();
  w.add_string("general.architecture", arch);
  w.add_string("general.type", "model");
  w.add_string("general.name", name.empty() ? fs::path(model.path).parent_path().filename().string()
                                            : name);
  w.add_uint32(arch + ".block_count", static_cast<uint32_t>(c.num_hidden_layers));
  w.add_uint32(arch + ".context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.add_uint32(arch + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.add_uint32(arch + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.add_uint32(arch + ".attention.head_count", static_cast<uint32_t>(c.num_attention_heads));
  w.add_uint32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.num_key_value_heads));
  w.add_float32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_float32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.add_uint32(arch + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.add_uint32(arch + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  add_tokenizer(w, model);
}

std::optional<std::string> gguf_tensor_name(const std::string& hf_name) {
  if (hf_name == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf_name == "model.norm.weight") return "output_norm.weight";
  if (hf_name == "lm_head.weight") return "output.weight";
  long long layer = -1;
  int used = 0;
  if (std::sscanf(hf_name.c_str(), "model.layers.%lld.%n", &layer, &used) != 1 || used == 0) {
    return std::nullopt;
  }
  const std::string rest = hf_name.substr(static_cast<size_t>(used));
  for (const auto& [hf, gguf] : kLayerTensors) {
    if (rest == hf) return "blk." + std::to_string(layer) + "." + gguf;
  }
  return std::nullopt;
}

long long gguf_tensor_order(const std::string& gguf_name) {
  constexpr long long kPerLayer = 100;
  if (gguf_name == "token_embd.weight") return -1;
  if (gguf_name == "output_norm.weight") return (1LL << 40);
  if (gguf_name == "output.weight") return (1LL << 40) + 1;
  long long layer = -1;
  int used = 0;
  if (std::sscanf(gguf_name.c_str(), "blk.%lld.%n", &layer, &used) == 1 && used > 0) {
    const std::string rest = gguf_name.substr(static_cast<size_t>(used));
    for (size_t i = 0; i < kLayerTensors.size(); ++i) {
      if (rest == kLayerTensors[i].second) {
        return layer * kPerLayer + static_cast<long long>(i);
      }
    }
    return layer * kPerLayer + kPerLayer - 1;
  }
  return (1LL << 40) + 2;
}

}  // namespace qs
