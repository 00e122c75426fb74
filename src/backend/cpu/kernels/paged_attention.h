// Causal attention over the paged KV cache, one query token at a time.
//
// For query token t at position p of a sequence with block table bt, for each query head h with
// KV head g = h / (n_heads / n_kv_heads) (GQA, Ainslie et al. 2023):
//   s[j]   = q[t, h, :] . K[bt[j / 16], g, j % 16, :] * scale,   j = 0..p
//   out[t, h, :] = sum_j softmax(s)[j] * V[bt[j / 16], g, j % 16, :]
// scale = 1 / sqrt(head_dim). One pass over the KV blocks with an online softmax (running max and
// sum, partial output rescaled when a block raises the max: Milakov & Gimelshein 2018, as in
// FlashAttention). GQA-aware: each K and V row is read and converted from F16 once for all query
// heads of its group. exp() is a polynomial with relative error below 2^-22 (AVX2 builds).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/kv_layout.h"

namespace qs::kernels {

struct AttentionShape {
  int64_t n_heads;
  int64_t n_kv_heads;
  int64_t head_dim;
};

/// q [n_heads, head_dim] f32 of one token; out [n_heads, head_dim] f32; keys/values at positions
/// [0, n_context) read through `block_table` (block ids in position order) from one layer's
/// arrays `kv`. head_dim <= 512. No allocation.
void paged_attention_token(const float* q, const AttentionShape& shape, const KvLayerView& kv,
                           const int32_t* block_table, int64_t n_context, float* out);

/// Writes k, v [n_kv_heads, head_dim] f32 of one token into slot `slot` (= block * kKvBlockSize +
/// row, StepBatch::slot_mapping) of one layer's arrays, encoded in kv.element_type. A negative
/// slot writes nothing (padded rows).
void kv_store(const KvLayerView& kv, int32_t slot, const float* k, const float* v);

}  // namespace qs::kernels
