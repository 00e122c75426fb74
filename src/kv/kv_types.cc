#include "kv/kv_types.h"

#include "core/error.h"

namespace qs {

KvDType parse_kv_dtype(const std::string& name) {
  if (name == "f32") return KvDType::kF32;
  if (name == "f16") return KvDType::kF16;
  if (name == "bf16") return KvDType::kBF16;
  if (name == "q8_0") return KvDType::kQ8_0;
  throw Error("unknown KV cache type '" + name + "' (expected f16, bf16, q8_0 or f32)");
}

DType kv_element_type(KvDType dtype) {
  switch (dtype) {
    case KvDType::kF32: return DType::F32;
    case KvDType::kF16: return DType::F16;
    case KvDType::kBF16: return DType::BF16;
    case KvDType::kQ8_0: return DType::Q8_0;
  }
  return DType::F16;
}

size_t kv_row_bytes(const ModelConfig& config, KvDType dtype) {
  const DType type = kv_element_type(dtype);
  if (config.head_dim % static_cast<int64_t>(dtype_info(type).block_size) != 0) {
    throw Error("KV cache type " + std::string(dtype_name(type)) + " needs head_dim to be a multiple of " +
                std::to_string(dtype_info(type).block_size) + " (head_dim is " + std::to_string(config.head_dim) +
                ")");
  }
  return row_bytes(type, config.head_dim);
}

size_t kv_bytes_per_block_dense(const ModelConfig& config, KvDType dtype) {
  return 2 * static_cast<size_t>(config.num_hidden_layers) * config.num_key_value_heads * kKvBlockSize *
         kv_row_bytes(config, dtype);
}

int32_t kv_blocks_for_context(int64_t n_tokens, int64_t n_sequences) {
  return static_cast<int32_t>((n_tokens + kKvBlockSize - 1) / kKvBlockSize * n_sequences);
}

}  // namespace qs
