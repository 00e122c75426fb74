// Host-side planning of the CUDA backend: plain C++ (no CUDA headers), compiled into every build so
// that CI tests it on the CPU (tests/backend/cuda/step_plan_test.cc).
//
//   - graph_buckets / bucket_for: the decode batch sizes CUDA graphs are captured for (vLLM's
//     cudagraph capture sizes: 1, 2, 4, 8, then steps that grow with the size);
//   - plan_kv_splits: how many KV splits a split-KV (flash-decoding) attention launch uses;
//   - validate_step / pack_step: the checks a step passes before anything is launched, and the
//     flat int32 buffer that is copied to the device in one go (padded rows write no KV);
//   - kv_cache_blocks: the paged KV cache size from --gpu-memory-utilization (vLLM's rule).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/step_batch.h"

namespace qs::cuda_plan {

/// Decode batch sizes a CUDA graph is captured for, ascending, each <= max_seqs, the last equal to
/// max_seqs: 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, ... (from 32 on: 1.5x and 2x of
/// each power of two). Throws qs::Error when max_seqs < 1.
std::vector<int32_t> graph_buckets(int32_t max_seqs);

/// The smallest bucket >= n, or -1 when n exceeds the largest (the step then runs eagerly).
/// `buckets` must be ascending (graph_buckets' output).
int32_t bucket_for(std::span<const int32_t> buckets, int32_t n);

/// A split-KV attention launch: each (query token, KV head) pair is processed by n_splits thread
/// blocks, split s reading KV blocks [s * blocks_per_split, (s + 1) * blocks_per_split) of its
/// sequence's block table; splits past a token's context are empty (they write -inf / 0 partials
/// that the combine step ignores).
struct KvSplitPlan {
  int32_t n_splits = 1;
  int32_t blocks_per_split = 1;  // KV blocks (kKvBlockSize tokens each)
};

/// Chooses the splits so that n_tokens * n_kv_heads * n_splits work items give every SM about two
/// blocks (flash-decoding, Dao et al. 2023), with at most `max_splits` splits, at least one KV
/// block per split, and no split that is empty for the longest context. `max_context` is the
/// longest context in tokens (>= 1). Throws qs::Error for non-positive arguments.
KvSplitPlan plan_kv_splits(int32_t n_tokens, int32_t n_kv_heads, int32_t max_context, int32_t n_sms,
                           int32_t max_splits = 16);

/// What the device needs to check a step against.
struct StepLimits {
  int64_t vocab_size = 0;
  int64_t max_batch_tokens = 0;
  int64_t max_context_tokens = 0;
  int32_t max_seqs = 0;
  int32_t kv_blocks = 0;  // KV blocks allocated (block ids [0, kv_blocks))
};

/// Checks everything a kernel would index with: n_tokens in [1, max_batch_tokens], n_seqs <=
/// max_seqs, query_start_loc spanning the batch, token ids inside the vocabulary, positions in
/// [0, max_context_tokens), each slot equal to its block-table slot (or -1), block ids inside the
/// KV cache, seq_lens equal to the last position + 1, logits indices inside the batch. Throws
/// qs::Error naming the first problem.
void validate_step(const StepBatch& batch, const StepLimits& limits);

/// Offsets (in int32 elements) of the sections of a packed step; every section of per-token data
/// has `padded_tokens` entries.
struct PackedLayout {
  int32_t padded_tokens = 0, padded_seqs = 0, table_width = 0, padded_logits = 0;
  size_t token_ids = 0, positions = 0, slot_mapping = 0, token_seq = 0, context_lens = 0,
         block_tables = 0, logits_indices = 0, total = 0;
};

/// Padding of a packed step (-1: none, the batch's own size). A CUDA graph is replayed on a
/// layout of fixed sizes: a decode bucket pads tokens, sequences and logits rows to the bucket and
/// the block tables to the widest table the context allows.
struct PackPadding {
  int32_t tokens = -1, seqs = -1, table_width = -1, logits = -1;
};

/// Lays out `batch` for the device, padded per `padding` (P tokens, S sequences, W table width,
/// L logits rows):
///   token_ids[P], positions[P], slot_mapping[P] (-1 for padding: no KV write),
///   token_seq[P] (sequence of each token; 0 for padding), context_lens[P] (positions + 1: the
///   causal context of each token; 0 for padding: attention reads nothing and writes zeros),
///   block_tables[S, W] (-1 past each table and for padded sequences), logits_indices[L]
///   (padded rows point at token 0).
/// Throws qs::Error when a padded size is below the batch's own.
PackedLayout pack_step(const StepBatch& batch, const PackPadding& padding, std::vector<int32_t>& out);

/// True when every sequence of `batch` contributes one token and wants its logits, in order: a
/// decode step, the kind replayed from a CUDA graph.
bool is_decode_step(const StepBatch& batch);

/// KV blocks that fit in the device memory --gpu-memory-utilization leaves (vLLM's rule): the
/// process may use total * utilization bytes; what is already in use (total - free: weights,
/// activations, other processes) is subtracted, and `reserve_bytes` (scratch still to allocate)
/// too. Returns 0 when nothing is left. Throws qs::Error for utilization outside (0, 1] or
/// bytes_per_block == 0.
int32_t kv_cache_blocks(size_t total_bytes, size_t free_bytes, double utilization, size_t bytes_per_block,
                        size_t reserve_bytes = 0);

}  // namespace qs::cuda_plan
