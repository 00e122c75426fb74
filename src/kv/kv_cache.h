// Paged KV cache storage, allocated once at start from a memory budget.
//
// Per layer, K and V each have shape [n_blocks, n_kv_heads, block_size, head_dim], stored as F32,
// F16 (default), BF16 or Q8_0 (head_dim / 32 blocks of 34 bytes per row: half the bytes of F16,
// so twice the tokens per --kv-cache-memory). Row (block, head, r) holds the key/value of the token
// at position block_index * block_size + r of whichever sequence owns the block (see BlockTable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "formats/dtype.h"
#include "kv/block_pool.h"
#include "model/model_config.h"

namespace qs {

enum class KvDType { kF32, kF16, kBF16, kQ8_0 };

/// Parses "f32" / "f16" / "bf16" / "q8_0". Throws qs::Error for anything else.
KvDType parse_kv_dtype(const std::string& name);
/// The tensor element type a KV row is stored as (its bytes follow core/dtype.h's layouts).
DType kv_element_type(KvDType dtype);

class KvCache {
 public:
  /// Allocates `n_blocks` blocks for every layer (zero-filled). Throws qs::Error when n_blocks < 1
  /// or, for Q8_0, when head_dim is not a multiple of 32.
  KvCache(const ModelConfig& config, KvDType dtype, int32_t n_blocks);

  /// Bytes one block takes across all layers, K and V: 2 * layers * kv_heads * 16 * row bytes
  /// (row bytes: head_dim * 4 / 2 / 2 for F32 / F16 / BF16, head_dim / 32 * 34 for Q8_0).
  static size_t bytes_per_block(const ModelConfig& config, KvDType dtype);
  /// Blocks that hold `n_tokens` tokens of context for `n_sequences` sequences (each rounded up).
  static int32_t blocks_for_context(int64_t n_tokens, int64_t n_sequences = 1);

  KvDType dtype() const { return dtype_; }
  DType element_type() const { return kv_element_type(dtype_); }
  /// Bytes of one stored row of head_dim values.
  size_t row_bytes() const { return row_bytes_; }
  int32_t n_blocks() const { return n_blocks_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  size_t total_bytes() const { return total_bytes_; }
  BlockPool& pool() { return pool_; }

  /// Byte offset of row (block, kv_head, row_in_block) within one layer's K or V array.
  size_t row_byte_offset(int32_t block, int64_t kv_head, int32_t row_in_block) const {
    return ((static_cast<size_t>(block) * n_kv_heads_ + kv_head) * kKvBlockSize + row_in_block) *
           row_bytes_;
  }
  /// Base of layer `layer`'s K (or V) array; rows of row_bytes() in element_type().
  uint8_t* k_layer(int64_t layer) { return storage_.get() + (2 * layer) * layer_bytes_; }
  uint8_t* v_layer(int64_t layer) { return storage_.get() + (2 * layer + 1) * layer_bytes_; }

 private:
  KvDType dtype_;
  int32_t n_blocks_;
  int64_t n_kv_heads_;
  int64_t head_dim_;
  size_t row_bytes_;
  size_t layer_bytes_;
  size_t total_bytes_;
  std::unique_ptr<uint8_t[]> storage_;
  BlockPool pool_;
};

}  // namespace qs
