// Causal attention over the paged KV cache: one query token (decode), or a tile of up to
// kMaxQueryTile query tokens of one sequence (prefill) that reads each K / V row once for the tile.
//
// For query token t at position p of a sequence with block table bt, for each query head h with
// KV head g = h / (n_heads / n_kv_heads) (GQA, Ainslie et al. 2023):
//   s[j]   = q[t, h, :] . K[bt[j / 16], g, j % 16, :] * scale,   j = 0..p
//   out[t, h, :] = sum_j softmax(s)[j] * V[bt[j / 16], g, j % 16, :]
// scale = 1 / sqrt(head_dim). One pass over the KV blocks with an online softmax (running max and
// sum, partial output rescaled when a block raises the max: Milakov & Gimelshein 2018, as in
// FlashAttention). GQA-aware: each K and V row is read and converted from F16 once for all query
// heads of its group. exp() is a polynomial with relative error below 2^-22 on the AVX2 path.
//
// The tile form exists for long prompts: one query row at a time reads and converts the whole
// context once per token (O(n^2) row conversions and cache traffic over a prefill chunk); a tile of
// T tokens does that once per T tokens. Its output per token is bit-identical to the token form
// (same operations in the same order per output value), so batching never changes results.
//
// On the AVX-512 levels the scores of 4 query heads x the 16 keys of a block are formed in
// registers (16 accumulators per 4 keys, one shuffle-and-add tree, a 128-bit-lane transpose:
// paged_attention_impl.h scores_4x16) and the softmax step runs on one zmm per head; the AVX2 path
// keeps 4-head x 2-key tiles with horizontal adds and per-score stores. One 4B-shaped layer over
// 2048 prompt tokens, tiles of 8, 1 thread, Zen 5 VM (session 22): 71 -> 113 GFLOP/s; one token at a
// time over 512: 48 -> 60.
//
// paged_attention_token runs the path of active_cpu_isa() (AttentionKernels): scalar in
// paged_attention.cc, AVX2 + FMA + F16C in paged_attention_avx2.cc, AVX-512 F/BW/VL in
// paged_attention_avx512.cc (also the avx512_vnni and avx512_bf16 levels), all compiled from
// paged_attention_impl.h. kv_store is generic (formats/ encoders).
#pragma once

#include <cstdint>

#include "backend/cpu/kernels/cpu_isa.h"
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

/// Query tokens per paged_attention_tile call: 16 tokens x 8 heads x 16 scores stay on the stack
/// (8 KiB), and the tile's output rows (16 x n_heads x head_dim f32, 32 KiB per KV group of 4
/// heads at head_dim 128) stay in L1/L2 while a KV block is applied to them. 16 rather than 8
/// halves the K / V reads and f16 conversions per query token: one 4B-shaped layer over 2048
/// prompt tokens, 1 thread, Zen 5 VM (session 22): 113 -> 121 GFLOP/s.
inline constexpr int kMaxQueryTile = 16;

/// A tile of n_q (1..kMaxQueryTile) query tokens of one sequence: token t's q is the row
/// q + t * q_stride ([n_heads, head_dim] f32), it attends to keys / values at positions
/// [0, n_context[t]) (causal: its position + 1, >= 1), and its output goes to out + t * out_stride
/// ([n_heads, head_dim] f32). Equal, bit for bit, to n_q paged_attention_token calls. No
/// allocation (64 KiB of stack).
void paged_attention_tile(const float* q, int64_t q_stride, int n_q, const int64_t* n_context,
                          const AttentionShape& shape, const KvLayerView& kv, const int32_t* block_table,
                          float* out, int64_t out_stride);

/// Writes k, v [n_kv_heads, head_dim] f32 of one token into slot `slot` (= block * kKvBlockSize +
/// row, StepBatch::slot_mapping) of one layer's arrays, encoded in kv.element_type. A negative
/// slot writes nothing (padded rows). Only KV heads [head_begin, head_end) are written when given
/// (head_end -1: through the last), so threads can store disjoint heads of one token.
/// Throws qs::Error when [head_begin, head_end) is not inside [0, kv.n_kv_heads).
void kv_store(const KvLayerView& kv, int32_t slot, const float* k, const float* v, int64_t head_begin = 0,
              int64_t head_end = -1);

/// One ISA level's attention kernels. `token` and `tile` have paged_attention_token's and
/// paged_attention_tile's contracts; `dot` and
/// `dot4` are the f32 dot products it uses (vec_dot.h: dot(a, b, n) = sum_i a[i] b[i];
/// dot4(x, rows, n, out): out[r] = dot(x, rows[r], n), bit-identical per row to dot).
struct AttentionKernels {
  CpuIsa isa;
  void (*token)(const float* q, const AttentionShape& shape, const KvLayerView& kv,
                const int32_t* block_table, int64_t n_context, float* out);
  void (*tile)(const float* q, int64_t q_stride, int n_q, const int64_t* n_context,
               const AttentionShape& shape, const KvLayerView& kv, const int32_t* block_table, float* out,
               int64_t out_stride);
  float (*dot)(const float* a, const float* b, int64_t n);
  void (*dot4)(const float* x, const float* const rows[4], int64_t n, float out[4]);
};

/// The kernels of one level, or nullptr when the CPU or the build lacks that level's path.
const AttentionKernels* attention_kernels_for(CpuIsa isa);
/// The kernels paged_attention_token runs (highest filled level <= active_cpu_isa()).
const AttentionKernels& active_attention_kernels();

// Per-level tables; avx2_attention_kernels() is nullptr without an AVX2 build path and must only
// be called after cpu_has_isa(CpuIsa::kAvx2).
const AttentionKernels& scalar_attention_kernels();
const AttentionKernels* avx2_attention_kernels();
// nullptr without an AVX-512 build path; only after cpu_has_isa(CpuIsa::kAvx512).
const AttentionKernels* avx512_attention_kernels();

}  // namespace qs::kernels
