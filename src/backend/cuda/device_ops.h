// Single kernels of the CUDA backend run on host data, for the device tests
// (tests/backend/cuda/cuda_kernels_test.cc). Plain C++: the definitions (device_ops_cuda.cc) exist
// only in builds with CUDA (QS_HAVE_CUDA). Each call copies its inputs to device 0, runs one
// launcher of kernels.h / gemm.h, synchronizes and copies the result back; bf16 outputs come back
// as float. Throws qs::Error for any CUDA failure.
#pragma once

#include <cstdint>
#include <vector>

namespace qs::cuda_ops {

/// bf16(x[r] * rsqrt(mean(x[r]^2) + eps) * w), x [rows, hidden].
std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w, int32_t rows, int32_t hidden,
                            float eps);

/// bf16(silu(g) * u) of gate_up [tokens, 2 * inter].
std::vector<float> silu_mul(const std::vector<float>& gate_up, int32_t tokens, int32_t inter);

/// D = X W^T through cuBLASLt: w [n, k] and x [t, k] rounded to bf16 first; d f32 [t, n].
std::vector<float> gemm(const std::vector<float>& w, const std::vector<float>& x, int32_t n, int32_t k, int32_t t);

/// Paged attention (kernels.h) over an f32 KV cache [n_blocks, n_kv_heads, 16, head_dim] (K and V),
/// q [n_tokens, n_heads * head_dim] rounded to bf16 first; returns [n_tokens, n_heads * head_dim].
std::vector<float> paged_attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                                   const std::vector<float>& v_cache, const std::vector<int32_t>& token_seq,
                                   const std::vector<int32_t>& context_lens, const std::vector<int32_t>& block_tables,
                                   int32_t max_blocks_per_seq, int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads,
                                   int32_t head_dim, int32_t n_splits, int32_t blocks_per_split);

/// One row of device sampling (kernels.h sample_rows) over `logits` [n_rows, vocab] with the same
/// parameters for every row; no mask, bias or penalty. Returns the sampled ids.
std::vector<int32_t> sample(const std::vector<float>& logits, int32_t n_rows, int32_t vocab, float temperature,
                            int32_t top_k, float top_p, float min_p, uint64_t seed, uint64_t draws);

}  // namespace qs::cuda_ops
