#include "backend/cpu/model_runner.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/norm_rope.h"
#include "backend/cpu/kernels/paged_attention.h"

namespace qs {

namespace {
constexpr int64_t kMaxHeadDim = 512;
// Tokens whose quantized activations are held at once by the matmul scratch (~1.1 bytes per
// input feature each); larger batches are processed in chunks of this many tokens.
constexpr int64_t kMaxMatmulChunkTokens = 512;
}

ModelRunner::ModelRunner(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool,
                         int64_t max_batch_tokens, int64_t max_context_tokens)
    : config_(config),
      weights_(weights),
      pool_(pool),
      max_batch_tokens_(max_batch_tokens),
      max_context_tokens_(max_context_tokens),
      packed_(weights, kernels::active_dot_kernels(), pool, PackedModelWeights::enabled_by_environment()),
      scratch_(pool.n_threads(),
               std::max({config.hidden_size, config.intermediate_size, config.q_dim()}),
               std::min<int64_t>(std::max<int64_t>(max_batch_tokens, 1), kMaxMatmulChunkTokens)) {
  if (config.head_dim > kMaxHeadDim) {
    throw Error("head_dim " + std::to_string(config.head_dim) + " exceeds the supported " +
                std::to_string(kMaxHeadDim));
  }
  if (max_batch_tokens < 1 || max_context_tokens < 1) {
    throw Error("ModelRunner: batch and context limits must be positive");
  }
  if (packed_.packed_tensors() > 0) decode_prefetch_ = choose_decode_prefetch(packed_.weights(), pool, scratch_);
  const auto n = static_cast<size_t>(max_batch_tokens);
  x_.resize(n * config.hidden_size);
  h_.resize(n * config.hidden_size);
  q_.resize(n * config.q_dim());
  k_.resize(n * config.kv_dim());
  v_.resize(n * config.kv_dim());
  attn_out_.resize(n * config.q_dim());
  gate_.resize(n * config.intermediate_size);
  up_.resize(n * config.intermediate_size);
  rope_.resize(n * config.head_dim);
  last_h_.resize(n * config.hidden_size);
  context_.resize(n);
  attention_tiles_.reserve(n);

  auto add_vector = [&](const TensorView* t) {
    if (t == nullptr) return;
    std::vector<float> values(static_cast<size_t>(t->n_elements()));
    dequantize_row(t->dtype, t->data, values.data(), t->n_elements());
    vectors_.emplace_back(t, std::move(values));
  };
  add_vector(weights.final_norm);
  for (const LayerWeights& l : weights.layers) {
    for (const TensorView* t : {l.attn_norm, l.ffn_norm, l.q_norm, l.k_norm, l.q_bias, l.k_bias,
                                l.v_bias}) {
      add_vector(t);
    }
  }
}

const float* ModelRunner::vector_f32(const TensorView* t) {
  if (t == nullptr) return nullptr;
  for (const auto& [view, values] : vectors_) {
    if (view == t) return values.data();
  }
  throw Error("ModelRunner: vector '" + t->name + "' was not prepared");
}

void ModelRunner::validate(const StepBatch& batch, const CpuKvStorage& kv) {
  const int64_t n = batch.n_tokens();
  if (n < 1) throw Error("forward: empty batch");
  if (n > max_batch_tokens_) {
    throw Error("forward: batch of " + std::to_string(n) + " tokens exceeds max_batch_tokens " +
                std::to_string(max_batch_tokens_));
  }
  const auto starts = batch.query_start_loc();
  if (starts.front() != 0 || starts.back() != n) throw Error("forward: query_start_loc does not span the batch");
  const auto tokens = batch.token_ids();
  const auto positions = batch.positions();
  const auto slots = batch.slot_mapping();
  const int64_t n_slots = static_cast<int64_t>(kv.n_blocks()) * kKvBlockSize;
  for (int32_t s = 0; s < batch.n_seqs(); ++s) {
    if (starts[s + 1] < starts[s]) throw Error("forward: query_start_loc is not ascending");
    int32_t max_pos = -1;
    for (int32_t i = starts[s]; i < starts[s + 1]; ++i) {
      if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
        throw Error("forward: token id " + std::to_string(tokens[i]) + " outside the vocabulary [0, " +
                    std::to_string(config_.vocab_size) + ")");
      }
      const int32_t pos = positions[i];
      if (pos < 0 || pos >= max_context_tokens_ || pos >= batch.seq_lens()[s]) {
        throw Error("forward: position " + std::to_string(pos) + " outside the context of " +
                    std::to_string(max_context_tokens_) + " tokens");
      }
      if (slots[i] >= n_slots) throw Error("forward: slot " + std::to_string(slots[i]) + " outside the KV cache");
      max_pos = std::max(max_pos, pos);
    }
    // Every block the attention reads ([0, max_pos]) must exist in the storage.
    const auto table = batch.block_table(s);
    if (max_pos >= 0 && max_pos / kKvBlockSize >= batch.max_blocks_per_seq()) {
      throw Error("forward: block table of sequence " + std::to_string(s) + " does not cover position " +
                  std::to_string(max_pos));
    }
    for (int32_t j = 0; max_pos >= 0 && j <= max_pos / kKvBlockSize; ++j) {
      if (table[j] < 0 || table[j] >= kv.n_blocks()) {
        throw Error("forward: block table of sequence " + std::to_string(s) + " does not cover position " +
                    std::to_string(max_pos) + " (block id " + std::to_string(table[j]) + ")");
      }
    }
  }
  for (int32_t index : batch.logits_indices()) {
    if (index < 0 || index >= n) throw Error("forward: logits index out of range");
  }
}

void ModelRunner::embed(const StepBatch& batch) {
  const int64_t hidden = config_.hidden_size;
  const TensorView& table = *weights_.embed_tokens;
  const size_t stride = row_bytes(table.dtype, hidden);
  pool_.parallel_for(batch.n_tokens(), [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      dequantize_row(table.dtype, table.data + stride * batch.token_ids()[i], &x_[i * hidden], hidden);
    }
  });
}

void ModelRunner::norm_rows(const float* x, const TensorView& weight, int64_t n_tokens, float* out) {
  const int64_t hidden = config_.hidden_size;
  const float* w = vector_f32(&weight);
  pool_.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      kernels::rms_norm(x + i * hidden, w, hidden, config_.rms_norm_eps, out + i * hidden);
    }
  });
}

void ModelRunner::attention_block(const StepBatch& batch, const CpuKvStorage& kv, int64_t layer) {
  const LayerWeights& w = packed_.weights().layers[layer];
  const int64_t n = batch.n_tokens();
  const int64_t hidden = config_.hidden_size;
  const int64_t d = config_.head_dim;
  const int64_t q_dim = config_.q_dim();
  const int64_t kv_dim = config_.kv_dim();
  norm_rows(x_.data(), *w.attn_norm, n, h_.data());
  // Q, K and V read the same normed rows: one fused call (one fork-join in a decode step).
  const kernels::MatmulOutput qkv[] = {{w.q_proj, q_.data(), vector_f32(w.q_bias)},
                                       {w.k_proj, k_.data(), vector_f32(w.k_bias)},
                                       {w.v_proj, v_.data(), vector_f32(w.v_bias)}};
  kernels::matmul_outputs(qkv, h_.data(), n, pool_, scratch_);

  const kernels::KvLayerView kv_layer = kv.layer(layer);
  const auto slots = batch.slot_mapping();
  const float* q_norm = vector_f32(w.q_norm);
  const float* k_norm = vector_f32(w.k_norm);
  const int64_t n_kv = config_.num_key_value_heads;
  const int64_t group = config_.num_attention_heads / n_kv;
  // Token i, KV heads [g0, g1): QK-norm (Qwen3) and RoPE of those K heads and of the query heads of
  // their groups, then their K and V rows stored in the cache. Every step is per head, so any split
  // of the heads gives the same bits.
  const auto prepare_heads = [&](int64_t i, int64_t g0, int64_t g1) {
    float* q = &q_[i * q_dim + g0 * group * d];
    float* k = &k_[i * kv_dim + g0 * d];
    const int64_t n_q_heads = (g1 - g0) * group;
    if (q_norm != nullptr) {
      for (int64_t h = 0; h < n_q_heads; ++h) kernels::rms_norm(q + h * d, q_norm, d, config_.rms_norm_eps, q + h * d);
      for (int64_t h = 0; h < g1 - g0; ++h) kernels::rms_norm(k + h * d, k_norm, d, config_.rms_norm_eps, k + h * d);
    }
    kernels::rope_neox(q, n_q_heads, d, &rope_[i * d]);
    kernels::rope_neox(k, g1 - g0, d, &rope_[i * d]);
    kernels::kv_store(kv_layer, slots[i], &k_[i * kv_dim], &v_[i * kv_dim], g0, g1);
  };

  // Attention of one tile over its KV heads [g0, g1): the kernel sees a model with g1 - g0 KV heads
  // whose K / V rows start g0 rows into each block (KvLayerView::row_offset keeps the full head
  // count as the block's stride) and whose q / out rows start at head g0 * group.
  const auto attend_heads = [&](const AttentionTile& tile, int64_t g0, int64_t g1) {
    const int64_t i = tile.first_token;
    kernels::KvLayerView heads = kv_layer;
    const size_t skip = static_cast<size_t>(g0) * kKvBlockSize * kv_layer.row_bytes;
    heads.k += skip;
    heads.v += skip;
    const kernels::AttentionShape shape{(g1 - g0) * group, g1 - g0, d};
    const int64_t first = g0 * group * d;
    kernels::paged_attention_tile(&q_[i * q_dim + first], q_dim, tile.n_tokens, &context_[i], shape, heads,
                                  batch.block_table(tile.seq).data(), &attn_out_[i * q_dim + first], q_dim);
  };
  const auto attend = [&](const AttentionTile& tile) { attend_heads(tile, 0, n_kv); };
  const auto n_tiles = static_cast<int64_t>(attention_tiles_.size());
  bool one_tile_per_seq = true;
  for (int64_t t = 1; t < n_tiles; ++t) one_tile_per_seq &= attention_tiles_[t].seq != attention_tiles_[t - 1].seq;
  // Fewer tiles than threads (decode of one or a few sequences): each tile's KV heads are split
  // into parts run in parallel, instead of one thread attending while the others wait. With one
  // tile per sequence each part also prepares and stores its own heads of the tile's tokens first
  // (no serial pass before): a part reads only the K / V rows of its heads, of earlier positions
  // (stored by earlier steps) and of the tile's own tokens (stored by this part), so no other part
  // writes a row it reads. Heads are independent, so the results are the same bits.
  const bool split_heads = n_tiles < pool_.n_threads();
  const bool prepare_in_parts = split_heads && one_tile_per_seq;
  if (!prepare_in_parts) {
    pool_.parallel_for(n, [&](int64_t begin, int64_t end, int) {
      for (int64_t i = begin; i < end; ++i) prepare_heads(i, 0, n_kv);
    });
  }
  if (split_heads) {
    const int64_t parts = std::min<int64_t>(n_kv, pool_.n_threads());
    pool_.parallel_for(n_tiles * parts, [&](int64_t begin, int64_t end, int) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t part = item % parts;
        const AttentionTile& tile = attention_tiles_[item / parts];
        const int64_t g0 = part * n_kv / parts, g1 = (part + 1) * n_kv / parts;
        if (prepare_in_parts) {
          for (int64_t i = tile.first_token; i < tile.first_token + tile.n_tokens; ++i) prepare_heads(i, g0, g1);
        }
        attend_heads(tile, g0, g1);
      }
    });
  } else {
    // A tile's attention costs O(its positions), and parallel_for hands each thread a contiguous
    // range: over a prefill chunk the thread with the early tiles would idle (2 threads at pp512:
    // 1/4 vs 3/4 of the work). Work item p is the pair of tiles (p, n - 1 - p), balanced for any
    // contiguous split. Tiling does not change results (paged_attention_tile is bit-identical per
    // token to paged_attention_token).
    pool_.parallel_for((n_tiles + 1) / 2, [&](int64_t begin, int64_t end, int) {
      for (int64_t p = begin; p < end; ++p) {
        attend(attention_tiles_[p]);
        if (n_tiles - 1 - p != p) attend(attention_tiles_[n_tiles - 1 - p]);
      }
    });
  }

  kernels::matmul(*w.o_proj, attn_out_.data(), n, h_.data(), pool_, scratch_);
  for (int64_t i = 0; i < n * hidden; ++i) x_[i] += h_[i];
}

void ModelRunner::mlp_block(int64_t n, int64_t layer) {
  const LayerWeights& w = packed_.weights().layers[layer];
  const int64_t hidden = config_.hidden_size;
  norm_rows(x_.data(), *w.ffn_norm, n, h_.data());
  // Gate and up read the same normed rows: one fused call.
  const kernels::MatmulOutput gate_up[] = {{w.gate_proj, gate_.data(), nullptr}, {w.up_proj, up_.data(), nullptr}};
  kernels::matmul_outputs(gate_up, h_.data(), n, pool_, scratch_);
  const int64_t inter = config_.intermediate_size;
  pool_.parallel_for(n, [&](int64_t begin, int64_t end, int) {
    kernels::silu_mul(&gate_[begin * inter], &up_[begin * inter], (end - begin) * inter);
  });
  kernels::matmul(*w.down_proj, gate_.data(), n, h_.data(), pool_, scratch_);
  for (int64_t i = 0; i < n * hidden; ++i) x_[i] += h_[i];
}

void ModelRunner::compute_logits(const StepBatch& batch, float* logits) {
  const int64_t hidden = config_.hidden_size;
  const float* w = vector_f32(weights_.final_norm);
  for (int64_t j = 0; j < batch.n_logits(); ++j) {
    const int64_t i = batch.logits_indices()[j];
    kernels::rms_norm(&x_[i * hidden], w, hidden, config_.rms_norm_eps, &last_h_[j * hidden]);
  }
  kernels::matmul(*packed_.weights().lm_head, last_h_.data(), batch.n_logits(), logits, pool_, scratch_);
}

void ModelRunner::plan_attention_tiles(const StepBatch& batch) {
  const auto starts = batch.query_start_loc();
  const auto positions = batch.positions();
  attention_tiles_.clear();
  for (int32_t s = 0; s < batch.n_seqs(); ++s) {
    for (int32_t i = starts[s]; i < starts[s + 1]; i += kernels::kMaxQueryTile) {
      attention_tiles_.push_back({i, std::min<int32_t>(kernels::kMaxQueryTile, starts[s + 1] - i), s});
    }
  }
  for (int64_t i = 0; i < batch.n_tokens(); ++i) context_[i] = positions[i] + 1;
}

void ModelRunner::forward(const StepBatch& batch, const CpuKvStorage& kv, float* logits) {
  validate(batch, kv);
  plan_attention_tiles(batch);
  const int64_t n = batch.n_tokens();
  const int64_t d = config_.head_dim;
  for (int64_t i = 0; i < n; ++i) {
    kernels::rope_cos_sin(batch.positions()[i], d, config_.rope_theta, &rope_[i * d]);
  }
  embed(batch);
  for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    attention_block(batch, kv, layer);
    mlp_block(n, layer);
  }
  if (batch.n_logits() > 0) compute_logits(batch, logits);
}

}  // namespace qs
