// KV cache vocabulary shared by the block manager, the engine and every backend: the block size
// and the element types a KV row may be stored in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/dtype.h"
#include "model/model_config.h"

namespace qs {

inline constexpr int32_t kKvBlockSize = 16;  // tokens per KV block (PagedAttention, Kwon et al. 2023)

enum class KvDType { kF32, kF16, kBF16, kQ8_0 };

/// Parses "f32" / "f16" / "bf16" / "q8_0". Throws qs::Error for anything else.
KvDType parse_kv_dtype(const std::string& name);
/// The tensor element type a KV row is stored as (its bytes follow formats/dtype.h's layouts).
DType kv_element_type(KvDType dtype);
/// Bytes of one stored row of head_dim values: head_dim * 4 / 2 / 2 for F32 / F16 / BF16,
/// head_dim / 32 * 34 for Q8_0. Throws qs::Error when head_dim is not a multiple of the type's
/// block size (32 for Q8_0).
size_t kv_row_bytes(const ModelConfig& config, KvDType dtype);
/// Bytes of one block across all layers, K and V, for a backend that stores rows as above:
/// 2 * layers * kv_heads * kKvBlockSize * kv_row_bytes.
size_t kv_bytes_per_block_dense(const ModelConfig& config, KvDType dtype);
/// Blocks that hold `n_tokens` tokens of context for `n_sequences` sequences (each rounded up).
int32_t kv_blocks_for_context(int64_t n_tokens, int64_t n_sequences = 1);

}  // namespace qs
