#include "quantize/quantize_policy.h"

#include <array>
#include <cctype>
#include <cstdio>

namespace qs {
namespace {

struct MixInfo {
  QuantMix mix;
  std::string_view name;
  DType matrix_type;
  uint32_t file_type;  // llama_ftype
};

constexpr std::array<MixInfo, 8> kMixes = {{
    {QuantMix::kF32, "f32", DType::F32, 0},
    {QuantMix::kF16, "f16", DType::F16, 1},
    {QuantMix::kBF16, "bf16", DType::BF16, 32},
    {QuantMix::kQ8_0, "q8_0", DType::Q8_0, 7},
    {QuantMix::kQ4_0, "q4_0", DType::Q4_0, 2},
    {QuantMix::kQ4_K_M, "q4_k_m", DType::Q4_K, 15},
    {QuantMix::kQ5_K_M, "q5_k_m", DType::Q5_K, 17},
    {QuantMix::kQ6_K, "q6_k", DType::Q6_K, 18},
}};

const MixInfo& info(QuantMix mix) {
  for (const MixInfo& m : kMixes) {
    if (m.mix == mix) return m;
  }
  return kMixes[0];
}

// llama.cpp use_more_bits(i_layer, n_layers).
bool use_more_bits(int64_t layer, int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// Layer index of "blk.<i>.<rest>", or -1.
int64_t layer_of(const std::string& name) {
  long long layer = -1;
  int used = 0;
  if (std::sscanf(name.c_str(), "blk.%lld.%n", &layer, &used) == 1 && used > 0) return layer;
  return -1;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_output_matrix(const std::string& name, bool tied_embeddings) {
  return name == "output.weight" || (tied_embeddings && name == "token_embd.weight");
}

}  // namespace

std::optional<QuantMix> parse_quant_mix(std::string_view name) {
  for (const MixInfo& m : kMixes) {
    if (m.name == name) return m.mix;
  }
  return std::nullopt;
}

std::vector<std::string> quant_mix_names() {
  std::vector<std::string> names;
  for (const MixInfo& m : kMixes) names.emplace_back(m.name);
  return names;
}

std::string_view quant_mix_name(QuantMix mix) { return info(mix).name; }
uint32_t quant_mix_file_type(QuantMix mix) { return info(mix).file_type; }

std::optional<std::string> file_type_name(uint32_t file_type) {
  for (const MixInfo& m : kMixes) {
    if (m.file_type != file_type) continue;
    std::string name(m.name);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return name;
  }
  return std::nullopt;
}

DType fallback_type(DType wanted, int64_t row_elements, QuantMix mix) {
  DType t = wanted;
  auto fits = [row_elements](DType d) {
    return row_elements % static_cast<int64_t>(dtype_info(d).block_size) == 0;
  };
  if (!fits(t)) {
    if (t == DType::Q4_K) t = DType::Q4_0;
    else if (t == DType::Q5_K || t == DType::Q6_K) t = DType::Q8_0;
  }
  if (!fits(t)) t = mix == QuantMix::kBF16 ? DType::BF16 : mix == QuantMix::kF32 ? DType::F32 : DType::F16;
  return t;
}

DType tensor_type_for(QuantMix mix, const std::string& gguf_name, const std::vector<int64_t>& shape,
                      int64_t n_layers, bool tied_embeddings) {
  if (shape.size() < 2) return DType::F32;
  const MixInfo& m = info(mix);
  DType t = m.matrix_type;
  const bool k_mix = mix == QuantMix::kQ4_K_M || mix == QuantMix::kQ5_K_M;
  if ((k_mix || mix == QuantMix::kQ4_0) && is_output_matrix(gguf_name, tied_embeddings)) {
    t = DType::Q6_K;
  } else if (k_mix && (ends_with(gguf_name, ".attn_v.weight") ||
                       ends_with(gguf_name, ".ffn_down.weight"))) {
    const int64_t layer = layer_of(gguf_name);
    if (layer >= 0 && use_more_bits(layer, n_layers)) t = DType::Q6_K;
  }
  return fallback_type(t, shape.back(), mix);
}

}  // namespace qs
