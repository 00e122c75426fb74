#include "kv/kv_cache.h"

#include "core/error.h"

namespace qs {

KvDType parse_kv_dtype(const std::string& name) {
  if (name == "f32") return KvDType::kF32;
  if (name == "f16") return KvDType::kF16;
  throw Error("unknown KV cache type '" + name + "' (expected f16 or f32)");
}

size_t KvCache::bytes_per_block(const ModelConfig& config, KvDType dtype) {
  const size_t element = dtype == KvDType::kF32 ? 4 : 2;
  return 2 * static_cast<size_t>(config.num_hidden_layers) * config.num_key_value_heads *
         kKvBlockSize * config.head_dim * element;
}

int32_t KvCache::blocks_for_context(int64_t n_tokens, int64_t n_sequences) {
  return static_cast<int32_t>((n_tokens + kKvBlockSize - 1) / kKvBlockSize * n_sequences);
}

KvCache::KvCache(const ModelConfig& config, KvDType dtype, int32_t n_blocks)
    : dtype_(dtype),
      n_blocks_(n_blocks),
      n_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim),
      pool_(n_blocks) {
  if (n_blocks < 1) throw Error("KV cache needs at least one block");
  layer_bytes_ = bytes_per_block(config, dtype) / (2 * config.num_hidden_layers) * n_blocks;
  total_bytes_ = layer_bytes_ * 2 * config.num_hidden_layers;
  storage_.reset(new uint8_t[total_bytes_]());
}

}  // namespace qs
