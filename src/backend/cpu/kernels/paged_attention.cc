#include "backend/cpu/kernels/paged_attention.h"

#include <string>

#include "backend/cpu/kernels/paged_attention_impl.h"
#include "core/error.h"
#include "formats/quantize.h"

namespace qs::kernels {
namespace {

float dot_f32_scalar(const float* a, const float* b, int64_t n) { return dot_f32(a, b, n); }
void dot4_f32_scalar(const float* x, const float* const rows[4], int64_t n, float out[4]) {
  dot4_f32(x, rows, n, out);
}

}  // namespace

const AttentionKernels& scalar_attention_kernels() {
  static const AttentionKernels table = {CpuIsa::kScalar, attention_token_impl, attention_tile_impl,
                                         dot_f32_scalar,
                                         dot4_f32_scalar};
  return table;
}

const AttentionKernels* attention_kernels_for(CpuIsa isa) {
  if (!cpu_has_isa(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::kScalar: return &scalar_attention_kernels();
    case CpuIsa::kAvx2: return avx2_attention_kernels();
    case CpuIsa::kAvx512: return avx512_attention_kernels();
    default: return nullptr;  // the VNNI and BF16 levels run the kAvx512 table
  }
}

const AttentionKernels& active_attention_kernels() {
  static const AttentionKernels* const table = [] {
    IsaSlots<AttentionKernels> slots;
    for (int level = 0; level < kCpuIsaLevels; ++level) {
      slots.by_level[level] = attention_kernels_for(static_cast<CpuIsa>(level));
    }
    return pick_isa_slot(slots, active_cpu_isa());
  }();
  return *table;
}

void paged_attention_token(const float* q, const AttentionShape& shape, const KvLayerView& kv,
                           const int32_t* block_table, int64_t n_context, float* out) {
  active_attention_kernels().token(q, shape, kv, block_table, n_context, out);
}

void paged_attention_tile(const float* q, int64_t q_stride, int n_q, const int64_t* n_context,
                          const AttentionShape& shape, const KvLayerView& kv, const int32_t* block_table,
                          float* out, int64_t out_stride) {
  active_attention_kernels().tile(q, q_stride, n_q, n_context, shape, kv, block_table, out, out_stride);
}

void kv_store(const KvLayerView& kv, int32_t slot, const float* k, const float* v, int64_t head_begin,
              int64_t head_end) {
  if (head_end < 0) head_end = kv.n_kv_heads;
  if (head_begin < 0 || head_begin > head_end || head_end > kv.n_kv_heads) {
    throw Error("kv_store: KV head range [" + std::to_string(head_begin) + ", " + std::to_string(head_end) +
                ") is not inside the layer's " + std::to_string(kv.n_kv_heads) + " KV heads");
  }
  if (slot < 0) return;
  const int32_t block = slot / kKvBlockSize;
  const int32_t row = slot % kKvBlockSize;
  const int64_t head_dim = kv.head_dim;
  // The reference encoders of formats/, so the stored bytes equal what `qwenserve quantize` would
  // write for the same values.
  for (int64_t g = head_begin; g < head_end; ++g) {
    const size_t offset = kv.row_offset(block, g, row);
    quantize_row(kv.element_type, k + g * head_dim, kv.k + offset, head_dim);
    quantize_row(kv.element_type, v + g * head_dim, kv.v + offset, head_dim);
  }
}

}  // namespace qs::kernels
