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

#include "kv/kv_cache.h"

namespace qs::kernels {

struct AttentionShape {
  int64_t n_heads;
  int64_t n_kv_heads;
  int64_t head_dim;
};

/// q [n_heads, head_dim] f32 of one token; out [n_heads, head_dim] f32; keys/values at positions
/// [0, n_context) read through `block_table` from `layer` of `cache`. head_dim <= 512. No
/// allocation.
void paged_attention_token(const float* q, const AttentionShape& shape, KvCache& cache,
                           int64_t layer, const int32_t* block_table, int64_t n_context, float* out);

/// Writes k, v [n_kv_heads, head_dim] of the token at `position` into the cache rows that the
/// block table assigns to it.
void kv_cache_store(KvCache& cache, int64_t layer, const int32_t* block_table, int64_t position,
                    const float* k, const float* v);

}  // namespace qs::kernels
