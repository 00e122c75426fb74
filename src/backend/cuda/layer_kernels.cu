// Element-wise and row kernels of one decoder layer (see kernels.h for shapes). Simple, memory-bound
// kernels: one thread block per row (or per (token, head)), f32 arithmetic, bf16 / f16 storage.
// Sources of the formulas: Hugging Face modeling_qwen3.py (RMSNorm, q/k norm, NeoX rotate_half
// RoPE, SiLU MLP).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/kernels.h"
#include "kv/kv_types.h"

namespace qs::cuda {
namespace {

__device__ __forceinline__ float bf16_bits_to_float(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x / 32;
  float total = 0;
  for (int w = 0; w < n_warps; ++w) total += partial[w];
  return total;
}

__global__ void embed_gather_kernel(const uint16_t* embed, const int32_t* token_ids, int32_t hidden, float* x) {
  const int64_t t = blockIdx.x;
  const uint16_t* src = embed + static_cast<int64_t>(token_ids[t]) * hidden;
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) x[t * hidden + i] = bf16_bits_to_float(src[i]);
}

__global__ void rms_norm_kernel(const float* x, const int32_t* rows, const float* weight, int32_t hidden, float eps,
                                uint16_t* out) {
  const int64_t r = blockIdx.x;
  const int64_t row = rows != nullptr ? rows[r] : r;
  const float* xr = x + row * hidden;
  float ss = 0;
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) ss += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(hidden) + eps);
  for (int32_t i = threadIdx.x; i < hidden; i += blockDim.x) out[r * hidden + i] = float_to_bf16_bits(xr[i] * inv * weight[i]);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Block (token t, head h) with head_dim / 2 threads: thread i owns the RoPE pair (i, i + half).
// Heads [0, n_heads) are q, [n_heads, n_heads + n_kv) k, then v.
template <typename KvT>
__global__ void qk_norm_rope_kv_kernel(const float* qkv, const float* bias, const float* q_norm, const float* k_norm,
                                       const int32_t* positions, const int32_t* slot_mapping, int32_t n_heads,
                                       int32_t n_kv_heads, int32_t head_dim, float rope_theta, float eps,
                                       uint16_t* q_out, KvT* k_cache, KvT* v_cache) {
  const int64_t t = blockIdx.x;
  const int32_t h = blockIdx.y;
  const int32_t half = head_dim / 2;
  const int32_t i = threadIdx.x;
  const int64_t row_width = static_cast<int64_t>(n_heads + 2 * n_kv_heads) * head_dim;
  const int64_t col = static_cast<int64_t>(h) * head_dim;
  const float* src = qkv + t * row_width + col;
  float a = 0, b = 0;
  if (i < half) {
    a = src[i];
    b = src[i + half];
    if (bias != nullptr) {
      a += bias[col + i];
      b += bias[col + i + half];
    }
  }
  const bool is_q = h < n_heads, is_k = !is_q && h < n_heads + n_kv_heads;
  const float* norm = is_q ? q_norm : (is_k ? k_norm : nullptr);
  if (norm != nullptr) {  // uniform across the block: every thread takes this branch or none
    const float inv = rsqrtf(block_sum(a * a + b * b) / static_cast<float>(head_dim) + eps);
    if (i < half) {
      a = a * inv * norm[i];
      b = b * inv * norm[i + half];
    }
  }
  if (i >= half) return;
  if (is_q || is_k) {
    // NeoX RoPE: (a, b) -> (a cos - b sin, b cos + a sin), inv_freq_i = theta^(-2i / head_dim).
    const float inv_freq = powf(rope_theta, -2.0f * static_cast<float>(i) / static_cast<float>(head_dim));
    float s, c;
    sincosf(static_cast<float>(positions[t]) * inv_freq, &s, &c);
    const float ra = a * c - b * s, rb = b * c + a * s;
    a = ra;
    b = rb;
  }
  if (is_q) {
    uint16_t* dst = q_out + t * static_cast<int64_t>(n_heads) * head_dim + col;
    dst[i] = float_to_bf16_bits(a);
    dst[i + half] = float_to_bf16_bits(b);
    return;
  }
  const int32_t slot = slot_mapping[t];
  if (slot < 0) return;  // padded row: no KV write
  const int32_t kv_head = is_k ? h - n_heads : h - n_heads - n_kv_heads;
  const int64_t block = slot / kKvBlockSize, offset = slot % kKvBlockSize;
  const int64_t base = ((block * n_kv_heads + kv_head) * kKvBlockSize + offset) * head_dim;
  KvT* dst = (is_k ? k_cache : v_cache) + base;
  dst[i] = from_float<KvT>(a);
  dst[i + half] = from_float<KvT>(b);
}

__global__ void silu_mul_kernel(const float* gate_up, int32_t inter, uint16_t* act) {
  const int64_t t = blockIdx.y;
  const float* g = gate_up + t * 2 * inter;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < inter;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gv = g[i];
    act[t * inter + i] = float_to_bf16_bits(gv / (1.0f + expf(-gv)) * g[inter + i]);
  }
}

int32_t round_up_warp(int32_t n) { return (n + 31) / 32 * 32; }

}  // namespace

void embed_gather(const uint16_t* embed, const int32_t* token_ids, int32_t n_tokens, int32_t hidden, float* x,
                  cudaStream_t stream) {
  if (n_tokens < 1) return;
  embed_gather_kernel<<<n_tokens, 256, 0, stream>>>(embed, token_ids, hidden, x);
}

void rms_norm(const float* x, const int32_t* rows, const float* weight, int32_t n_rows, int32_t hidden, float eps,
              uint16_t* out, cudaStream_t stream) {
  if (n_rows < 1) return;
  rms_norm_kernel<<<n_rows, 256, 0, stream>>>(x, rows, weight, hidden, eps, out);
}

void qk_norm_rope_kv_write(const float* qkv, const float* bias, const float* q_norm, const float* k_norm,
                           const int32_t* positions, const int32_t* slot_mapping, int32_t n_tokens,
                           int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float rope_theta, float eps,
                           uint16_t* q_out, void* k_cache, void* v_cache, KvType kv_type, cudaStream_t stream) {
  if (n_tokens < 1) return;
  const dim3 grid(n_tokens, n_heads + 2 * n_kv_heads);
  const int32_t threads = round_up_warp(head_dim / 2);
  switch (kv_type) {
    case KvType::kF32:
      qk_norm_rope_kv_kernel<float><<<grid, threads, 0, stream>>>(
          qkv, bias, q_norm, k_norm, positions, slot_mapping, n_heads, n_kv_heads, head_dim, rope_theta, eps, q_out,
          static_cast<float*>(k_cache), static_cast<float*>(v_cache));
      break;
    case KvType::kF16:
      qk_norm_rope_kv_kernel<__half><<<grid, threads, 0, stream>>>(
          qkv, bias, q_norm, k_norm, positions, slot_mapping, n_heads, n_kv_heads, head_dim, rope_theta, eps, q_out,
          static_cast<__half*>(k_cache), static_cast<__half*>(v_cache));
      break;
    case KvType::kBF16:
      qk_norm_rope_kv_kernel<__nv_bfloat16><<<grid, threads, 0, stream>>>(
          qkv, bias, q_norm, k_norm, positions, slot_mapping, n_heads, n_kv_heads, head_dim, rope_theta, eps, q_out,
          static_cast<__nv_bfloat16*>(k_cache), static_cast<__nv_bfloat16*>(v_cache));
      break;
  }
}

void silu_mul(const float* gate_up, int32_t n_tokens, int32_t inter, uint16_t* act, cudaStream_t stream) {
  if (n_tokens < 1) return;
  const int32_t threads = 256;
  const dim3 grid((inter + threads - 1) / threads, n_tokens);
  silu_mul_kernel<<<grid, threads, 0, stream>>>(gate_up, inter, act);
}

}  // namespace qs::cuda
