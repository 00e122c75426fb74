// Launchers of the CUDA backend's own kernels (layer_kernels.cu, attention.cu, sampling.cu). Only
// files of src/backend/cuda/ include this header (it pulls in the CUDA runtime API).
//
// Conventions: row-major arrays; "bf16" is __nv_bfloat16 passed as uint16_t bits; every launcher
// enqueues on `stream` and returns without synchronizing (check cudaGetLastError afterwards).
// Activations: the residual stream x is f32, GEMM inputs are bf16, GEMM outputs f32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace qs::cuda {

/// Element type of the paged KV cache.
enum class KvType { kF32, kF16, kBF16 };

/// x[t, :] = embed[token_ids[t], :] (bf16 -> f32). x: [n_tokens, hidden].
void embed_gather(const uint16_t* embed, const int32_t* token_ids, int32_t n_tokens, int32_t hidden, float* x,
                  cudaStream_t stream);

/// out[r, :] = bf16(x[row(r), :] * rsqrt(mean(x[row(r), :]^2) + eps) * weight), row(r) = rows[r]
/// when `rows` is given, else r. x f32 [*, hidden], weight f32 [hidden], out bf16 [n_rows, hidden].
void rms_norm(const float* x, const int32_t* rows, const float* weight, int32_t n_rows, int32_t hidden, float eps,
              uint16_t* out, cudaStream_t stream);

/// Per token t of qkv f32 [n_tokens, (n_heads + 2 * n_kv_heads) * head_dim] (q | k | v):
///   - adds `bias` (f32 [(n_heads + 2 n_kv) * head_dim], Qwen2) when given;
///   - q and k heads: RMSNorm over head_dim with q_norm / k_norm (Qwen3) when given, then NeoX
///     RoPE at positions[t] (pairs (i, i + head_dim/2), angle pos * theta^(-2i/head_dim));
///   - q -> q_out bf16 [n_tokens, n_heads * head_dim];
///   - k, v -> the KV cache of this layer at slot_mapping[t] (skipped when -1), layout
///     [n_blocks, n_kv_heads, kKvBlockSize, head_dim] of `kv_type`.
/// head_dim must be even and <= 512.
void qk_norm_rope_kv_write(const float* qkv, const float* bias, const float* q_norm, const float* k_norm,
                           const int32_t* positions, const int32_t* slot_mapping, int32_t n_tokens,
                           int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float rope_theta, float eps,
                           uint16_t* q_out, void* k_cache, void* v_cache, KvType kv_type, cudaStream_t stream);

/// act[t, i] = bf16(silu(gate_up[t, i]) * gate_up[t, inter + i]); gate_up f32 [n_tokens, 2 inter].
void silu_mul(const float* gate_up, int32_t n_tokens, int32_t inter, uint16_t* act, cudaStream_t stream);

/// Scratch of a split-KV attention launch (attention.cu): partial max, sum and output per
/// (token, head, split).
struct AttentionScratch {
  float* m = nullptr;    // [max_tokens, n_heads, max_splits]
  float* l = nullptr;    // [max_tokens, n_heads, max_splits]
  float* acc = nullptr;  // [max_tokens, n_heads, max_splits, head_dim]
};

/// Causal paged attention with GQA: token t (sequence token_seq[t]) attends to positions
/// [0, context_lens[t]) of its sequence, read through block_tables [n_seqs, max_blocks_per_seq]
/// from the layer's K / V caches. One thread block per (token, KV head, split) reads each KV block
/// once for the whole GQA group; splits are merged by a second kernel (flash-decoding). Tokens
/// with context_lens 0 (padding) get zeros. q bf16 [n_tokens, n_heads * head_dim], out bf16
/// [n_tokens, n_heads * head_dim], scale = 1/sqrt(head_dim).
void paged_attention(const uint16_t* q, const void* k_cache, const void* v_cache, KvType kv_type,
                     const int32_t* token_seq, const int32_t* context_lens, const int32_t* block_tables,
                     int32_t max_blocks_per_seq, int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads,
                     int32_t head_dim, int32_t n_splits, int32_t blocks_per_split, const AttentionScratch& scratch,
                     uint16_t* out, cudaStream_t stream);

/// Per-row parameters of device sampling (mirrors SamplingRow; see backend/sampling_batch.h).
struct DeviceSamplingRow {
  float temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  int32_t top_k, mask_row;
  uint64_t seed, draws;
  int32_t prompt_begin, prompt_len, output_begin, output_len, bias_begin, bias_len;
};

/// Inputs and outputs of sample_rows, all device pointers.
struct SamplingBuffers {
  const float* raw = nullptr;          // [n_rows, vocab] logits as the model produced them
  float* processed = nullptr;          // [n_rows, vocab] scratch: logits after mask, bias, penalties
  int32_t* counts = nullptr;           // [n_rows, vocab] scratch for penalties
  const DeviceSamplingRow* rows = nullptr;
  const uint32_t* masks = nullptr;     // [n_mask_rows, (vocab + 31) / 32]
  const int32_t* history = nullptr;
  const int32_t* bias_ids = nullptr;
  const float* bias_values = nullptr;
  int32_t* sampled = nullptr;          // [n_rows] token id; -1: NaN or every token masked
  float* sampled_logprob = nullptr;    // [n_rows] log_softmax(raw)[sampled]
};

/// Sampling on the device in the order of backend/sampling_batch.h: allowed mask, logit bias,
/// repetition penalty (prompt + output), frequency / presence penalties (output), then argmax
/// (temperature 0 or top_k 1; ties: lowest id) or softmax(l / T) with top-k, top-p and min-p
/// cut-offs and one inverse-CDF draw u = philox::uniform(seed, draws). The cut-offs are found by
/// bisection over the float order, so tokens tied at a cut-off are all kept.
/// `any_penalty`: at least one row has a penalty (counts are built only then).
void sample_rows(const SamplingBuffers& b, int32_t n_rows, int32_t vocab, bool any_penalty, cudaStream_t stream);

}  // namespace qs::cuda
