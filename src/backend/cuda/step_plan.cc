#include "backend/cuda/step_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace qs::cuda_plan {

std::vector<int32_t> graph_buckets(int32_t max_seqs) {
  if (max_seqs < 1) throw Error("graph_buckets: max_seqs must be >= 1");
  std::vector<int32_t> sizes = {1, 2, 4, 8, 16, 24, 32};
  for (int64_t p = 32; sizes.back() < max_seqs; p *= 2) {
    sizes.push_back(static_cast<int32_t>(std::min<int64_t>(p * 3 / 2, INT32_MAX)));
    sizes.push_back(static_cast<int32_t>(std::min<int64_t>(p * 2, INT32_MAX)));
  }
  std::vector<int32_t> out;
  for (int32_t s : sizes) {
    if (s < max_seqs) out.push_back(s);
  }
  out.push_back(max_seqs);
  return out;
}

int32_t bucket_for(std::span<const int32_t> buckets, int32_t n) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  return it == buckets.end() ? -1 : *it;
}

KvSplitPlan plan_kv_splits(int32_t n_tokens, int32_t n_kv_heads, int32_t max_context, int32_t n_sms,
                           int32_t max_splits) {
  if (n_tokens < 1 || n_kv_heads < 1 || max_context < 1 || n_sms < 1 || max_splits < 1) {
    throw Error("plan_kv_splits: arguments must be positive");
  }
  const int64_t blocks = (static_cast<int64_t>(max_context) + kKvBlockSize - 1) / kKvBlockSize;
  const int64_t items = static_cast<int64_t>(n_tokens) * n_kv_heads;
  const int64_t target = 2 * static_cast<int64_t>(n_sms);
  int64_t splits = (target + items - 1) / items;
  splits = std::clamp<int64_t>(splits, 1, std::min<int64_t>(max_splits, blocks));
  KvSplitPlan plan;
  plan.blocks_per_split = static_cast<int32_t>((blocks + splits - 1) / splits);
  plan.n_splits = static_cast<int32_t>((blocks + plan.blocks_per_split - 1) / plan.blocks_per_split);
  return plan;
}

void validate_step(const StepBatch& batch, const StepLimits& limits) {
  const int32_t n = batch.n_tokens();
  if (n < 1) throw Error("cuda backend: empty batch");
  if (n > limits.max_batch_tokens) {
    throw Error("cuda backend: batch of " + std::to_string(n) + " tokens exceeds max_batch_tokens " +
                std::to_string(limits.max_batch_tokens));
  }
  if (batch.n_seqs() < 1 || batch.n_seqs() > limits.max_seqs) {
    throw Error("cuda backend: " + std::to_string(batch.n_seqs()) + " sequences in a step (max_seqs " +
                std::to_string(limits.max_seqs) + ")");
  }
  const auto starts = batch.query_start_loc();
  if (starts.front() != 0 || starts.back() != n) throw Error("cuda backend: query_start_loc does not span the batch");
  for (int32_t s = 0; s < batch.n_seqs(); ++s) {
    if (starts[s + 1] <= starts[s]) throw Error("cuda backend: sequence " + std::to_string(s) + " has no tokens");
  }
  const auto ids = batch.token_ids();
  const auto pos = batch.positions();
  const auto slots = batch.slot_mapping();
  for (int32_t s = 0; s < batch.n_seqs(); ++s) {
    const auto table = batch.block_table(s);
    for (int32_t i = starts[s]; i < starts[s + 1]; ++i) {
      if (ids[i] < 0 || ids[i] >= limits.vocab_size) {
        throw Error("cuda backend: token id " + std::to_string(ids[i]) + " outside the vocabulary of " +
                    std::to_string(limits.vocab_size));
      }
      if (pos[i] < 0 || pos[i] >= limits.max_context_tokens) {
        throw Error("cuda backend: position " + std::to_string(pos[i]) + " outside the context of " +
                    std::to_string(limits.max_context_tokens) + " tokens");
      }
      // Every block up to this position is read by attention: it must exist in the cache.
      const int32_t last_block = pos[i] / kKvBlockSize;
      if (last_block >= batch.max_blocks_per_seq()) {
        throw Error("cuda backend: block table of sequence " + std::to_string(s) + " does not cover position " +
                    std::to_string(pos[i]));
      }
      for (int32_t b = 0; b <= last_block; ++b) {
        if (table[b] < 0 || table[b] >= limits.kv_blocks) {
          throw Error("cuda backend: block id " + std::to_string(table[b]) + " of sequence " + std::to_string(s) +
                      " outside the KV cache of " + std::to_string(limits.kv_blocks) + " blocks");
        }
      }
      const int32_t expected = table[last_block] * kKvBlockSize + pos[i] % kKvBlockSize;
      if (slots[i] != -1 && slots[i] != expected) {
        throw Error("cuda backend: slot " + std::to_string(slots[i]) + " of token " + std::to_string(i) +
                    " does not match its block table (" + std::to_string(expected) + ")");
      }
    }
  }
  for (int32_t idx : batch.logits_indices()) {
    if (idx < 0 || idx >= n) throw Error("cuda backend: logits index " + std::to_string(idx) + " outside the batch");
  }
}

PackedLayout pack_step(const StepBatch& batch, const PackPadding& padding, std::vector<int32_t>& out) {
  const int32_t n = batch.n_tokens();
  PackedLayout l;
  l.padded_tokens = padding.tokens < 0 ? n : padding.tokens;
  l.padded_seqs = padding.seqs < 0 ? batch.n_seqs() : padding.seqs;
  l.table_width = padding.table_width < 0 ? batch.max_blocks_per_seq() : padding.table_width;
  l.padded_logits = padding.logits < 0 ? batch.n_logits() : padding.logits;
  if (l.padded_tokens < n || l.padded_seqs < batch.n_seqs() || l.table_width < batch.max_blocks_per_seq() ||
      l.padded_logits < batch.n_logits()) {
    throw Error("pack_step: padding below the batch's own size");
  }
  const auto p = static_cast<size_t>(l.padded_tokens);
  l.token_ids = 0;
  l.positions = p;
  l.slot_mapping = 2 * p;
  l.token_seq = 3 * p;
  l.context_lens = 4 * p;
  l.block_tables = 5 * p;
  l.logits_indices = l.block_tables + static_cast<size_t>(l.padded_seqs) * l.table_width;
  l.total = l.logits_indices + static_cast<size_t>(l.padded_logits);
  out.assign(l.total, 0);
  std::copy(batch.token_ids().begin(), batch.token_ids().end(), out.begin() + l.token_ids);
  std::copy(batch.positions().begin(), batch.positions().end(), out.begin() + l.positions);
  std::copy(batch.slot_mapping().begin(), batch.slot_mapping().end(), out.begin() + l.slot_mapping);
  std::fill(out.begin() + l.slot_mapping + n, out.begin() + l.slot_mapping + p, -1);
  const auto starts = batch.query_start_loc();
  for (int32_t s = 0; s < batch.n_seqs(); ++s) {
    for (int32_t i = starts[s]; i < starts[s + 1]; ++i) out[l.token_seq + i] = s;
  }
  for (int32_t i = 0; i < n; ++i) out[l.context_lens + i] = batch.positions()[i] + 1;
  std::fill(out.begin() + l.block_tables, out.begin() + l.logits_indices, -1);
  for (int32_t s = 0; s < batch.n_seqs(); ++s) {
    const auto table = batch.block_table(s);
    std::copy(table.begin(), table.end(), out.begin() + l.block_tables + static_cast<size_t>(s) * l.table_width);
  }
  std::copy(batch.logits_indices().begin(), batch.logits_indices().end(), out.begin() + l.logits_indices);
  return l;
}

bool is_decode_step(const StepBatch& batch) {
  if (batch.n_tokens() != batch.n_seqs() || batch.n_logits() != batch.n_seqs()) return false;
  const auto idx = batch.logits_indices();
  for (int32_t i = 0; i < batch.n_logits(); ++i) {
    if (idx[i] != i) return false;
  }
  return true;
}

int32_t kv_cache_blocks(size_t total_bytes, size_t free_bytes, double utilization, size_t bytes_per_block,
                        size_t reserve_bytes) {
  if (!(utilization > 0.0 && utilization <= 1.0)) {
    throw Error("--gpu-memory-utilization must be in (0, 1], got " + std::to_string(utilization));
  }
  if (bytes_per_block == 0) throw Error("kv_cache_blocks: bytes_per_block must be positive");
  const double allowed = static_cast<double>(total_bytes) * utilization;
  const double used = static_cast<double>(total_bytes - std::min(free_bytes, total_bytes)) +
                      static_cast<double>(reserve_bytes);
  if (allowed <= used) return 0;
  const double blocks = std::floor((allowed - used) / static_cast<double>(bytes_per_block));
  return static_cast<int32_t>(std::min<double>(blocks, INT32_MAX));
}

}  // namespace qs::cuda_plan
