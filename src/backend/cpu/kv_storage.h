// The CPU backend's paged KV storage, allocated once from a block count.
//
// Per layer, K and V each have shape [n_blocks, n_kv_heads, kKvBlockSize, head_dim], stored as
// F32, F16 (default), BF16 or Q8_0 (head_dim / 32 blocks of 34 bytes per row: half the bytes of
// F16, so twice the tokens per --kv-cache-memory). Block ids come from the engine's BlockManager;
// this class only holds bytes. The buffer is not initialised: pages are touched only when a
// step writes KV into them (a large budget costs no start-up time), and attention reads only
// positions a step has written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/cpu/kernels/kv_layout.h"
#include "kv/kv_types.h"
#include "model/model_config.h"

namespace qs {

class CpuKvStorage {
 public:
  /// Allocates `n_blocks` blocks for every layer. Throws qs::Error when n_blocks < 1, when the
  /// dtype does not suit head_dim (Q8_0 needs a multiple of 32), or when the allocation fails.
  CpuKvStorage(const ModelConfig& config, KvDType dtype, int32_t n_blocks);

  KvDType dtype() const { return dtype_; }
  int32_t n_blocks() const { return n_blocks_; }
  size_t total_bytes() const { return total_bytes_; }
  /// Layer `layer`'s K and V arrays.
  kernels::KvLayerView layer(int64_t layer) const;

 private:
  KvDType dtype_;
  int32_t n_blocks_;
  int64_t n_kv_heads_;
  int64_t head_dim_;
  size_t row_bytes_;
  size_t layer_bytes_;
  size_t total_bytes_;
  std::unique_ptr<uint8_t[]> storage_;
};

}  // namespace qs
