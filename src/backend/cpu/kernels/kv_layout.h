// One layer's paged KV arrays as the CPU attention kernels see them: base pointers and strides,
// no ownership (the storage belongs to backend/cpu/kv_storage.h).
//
// K and V each: [n_blocks, n_kv_heads, kKvBlockSize, head_dim] rows of `row_bytes` bytes in
// `element_type` (F32, F16, BF16 or Q8_0). Row (block, head, r) holds the key / value of head
// `head` of the token in slot block * kKvBlockSize + r (vLLM's slot mapping).
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"
#include "kv/kv_types.h"

namespace qs::kernels {

struct KvLayerView {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
  DType element_type = DType::F16;
  size_t row_bytes = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;

  /// Byte offset of row (block, head, r) within the K (or V) array.
  size_t row_offset(int32_t block, int64_t head, int32_t r) const {
    return ((static_cast<size_t>(block) * n_kv_heads + head) * kKvBlockSize + r) * row_bytes;
  }
};

}  // namespace qs::kernels
