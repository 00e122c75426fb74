// The Qwen3 / Qwen2 forward pass of the CPU backend over a StepBatch, reading and writing the paged
// KV storage.
//
// Per layer (Qwen3; Qwen2 adds q/k/v biases and has no q/k norm):
//   h = rms_norm(x) * attn_norm
//   q = rope(q_norm(h Wq^T)), k = rope(k_norm(h Wk^T)), v = h Wv^T    (per head, NeoX RoPE)
//   x += attention(q, K, V) Wo^T                                        (causal, GQA, paged)
//   h = rms_norm(x) * ffn_norm
//   x += (silu(h Wgate^T) * (h Wup^T)) Wdown^T
// logits = rms_norm(x) * final_norm  Wlm^T.
// Source: Hugging Face transformers modeling_qwen3.py / modeling_qwen2.py.
//
// All activation buffers are allocated once in the constructor for `max_batch_tokens`.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kv_storage.h"
#include "backend/cpu/decode_prefetch.h"
#include "backend/cpu/packed_weights.h"
#include "backend/step_batch.h"
#include "core/thread_pool.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace qs {

class ModelRunner {
 public:
  /// `weights` must outlive the runner. Throws qs::Error if head_dim > 512.
  ModelRunner(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool,
              int64_t max_batch_tokens, int64_t max_context_tokens);

  /// Runs one step over `kv`. Writes logits [batch.n_logits(), vocab_size] f32 row-major into
  /// `logits`. Throws qs::Error (before touching any state) if the batch exceeds
  /// max_batch_tokens, a token id is outside the vocabulary, a position exceeds the context
  /// limit, a block table does not cover a position, a slot or block id is outside `kv`, or a
  /// logits index is out of range.
  void forward(const StepBatch& batch, const CpuKvStorage& kv, float* logits);

  const ModelConfig& config() const { return config_; }
  /// Matrices packed at load for the active kernels (packed_weights.h) and their bytes.
  int packed_tensors() const { return packed_.packed_tensors(); }
  size_t packed_bytes() const { return packed_.packed_bytes(); }
  /// Whether one-token packed matmuls prefetch in software, as measured at construction.
  const DecodePrefetchChoice& decode_prefetch() const { return decode_prefetch_; }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }
  int64_t max_context_tokens() const { return max_context_tokens_; }

 private:
  void validate(const StepBatch& batch, const CpuKvStorage& kv);
  void embed(const StepBatch& batch);
  void attention_block(const StepBatch& batch, const CpuKvStorage& kv, int64_t layer);
  // Splits each sequence's tokens into attention tiles of up to kernels::kMaxQueryTile
  // consecutive tokens (attention_tiles_) and sets context_[i] = positions[i] + 1.
  void plan_attention_tiles(const StepBatch& batch);
  void mlp_block(int64_t n_tokens, int64_t layer);
  void norm_rows(const float* x, const TensorView& weight, int64_t n_tokens, float* out);
  void compute_logits(const StepBatch& batch, float* logits);
  const float* vector_f32(const TensorView* t);  // 1-D weight as f32 (converted once at start)

  ModelConfig config_;
  const ModelWeights& weights_;
  ThreadPool& pool_;
  int64_t max_batch_tokens_;
  int64_t max_context_tokens_;
  PackedModelWeights packed_;  // the matrices matmul reads (packed where the kernels can)
  kernels::MatmulScratch scratch_;
  DecodePrefetchChoice decode_prefetch_;  // set at construction (decode_prefetch.h)

  // 1-D weights (norms, biases) converted to f32 once: keyed by tensor pointer.
  std::vector<std::pair<const TensorView*, std::vector<float>>> vectors_;

  // Activations, sized for max_batch_tokens rows.
  std::vector<float> x_;         // [n_tokens, hidden] residual stream
  std::vector<float> h_;         // [n_tokens, hidden] normed input
  std::vector<float> q_;         // [n_tokens, n_heads * head_dim]
  std::vector<float> k_;         // [n_tokens, n_kv_heads * head_dim]
  std::vector<float> v_;         // [n_tokens, n_kv_heads * head_dim]
  std::vector<float> attn_out_;  // [n_tokens, n_heads * head_dim]
  std::vector<float> gate_;      // [n_tokens, intermediate]
  std::vector<float> up_;        // [n_tokens, intermediate]
  std::vector<float> rope_;      // [n_tokens, head_dim] cos/sin per token
  std::vector<float> last_h_;    // [max_batch_tokens, hidden] rows needing logits
  std::vector<int64_t> context_;    // [max_batch_tokens] keys each token attends to (position + 1)
  struct AttentionTile {
    int32_t first_token;  // the tile's first token in the step
    int32_t n_tokens;     // 1..kernels::kMaxQueryTile consecutive tokens of one sequence
    int32_t seq;
  };
  std::vector<AttentionTile> attention_tiles_;  // this step's tiles, in token order
};

}  // namespace qs
