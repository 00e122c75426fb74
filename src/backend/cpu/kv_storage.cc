#include "backend/cpu/kv_storage.h"

#include <new>
#include <string>

#include "core/error.h"

namespace qs {

CpuKvStorage::CpuKvStorage(const ModelConfig& config, KvDType dtype, int32_t n_blocks)
    : dtype_(dtype),
      n_blocks_(n_blocks),
      n_kv_heads_(config.num_key_value_heads),
      head_dim_(config.head_dim),
      row_bytes_(kv_row_bytes(config, dtype)) {
  if (n_blocks < 1) throw Error("KV cache needs at least one block");
  layer_bytes_ = static_cast<size_t>(n_blocks) * n_kv_heads_ * kKvBlockSize * row_bytes_;
  total_bytes_ = layer_bytes_ * 2 * static_cast<size_t>(config.num_hidden_layers);
  // Default-initialised (new T[n], not new T[n]()): large allocations come from mmap and their
  // pages stay untouched until KV is written.
  storage_.reset(new (std::nothrow) uint8_t[total_bytes_]);
  if (!storage_) {
    throw Error("cannot allocate the KV cache: " + std::to_string(total_bytes_) + " bytes for " +
                std::to_string(n_blocks) + " blocks");
  }
}

kernels::KvLayerView CpuKvStorage::layer(int64_t layer) const {
  kernels::KvLayerView view;
  view.k = storage_.get() + (2 * layer) * layer_bytes_;
  view.v = storage_.get() + (2 * layer + 1) * layer_bytes_;
  view.element_type = kv_element_type(dtype_);
  view.row_bytes = row_bytes_;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  return view;
}

}  // namespace qs
