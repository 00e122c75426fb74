// Paged attention of the CUDA backend: split-KV (flash-decoding, Dao et al. 2023) with online
// softmax (Milakov & Gimelshein 2018), for decode and prefill tokens alike.
//
// Design note. Kernel 1: one thread block (4 warps) per (query token, KV head, split). It keeps the
// GQA group's G query heads in shared memory as f32, then walks its split's KV blocks: each
// 16-token block of K and V for this KV head is contiguous in the cache ([n_blocks, n_kv_heads,
// 16, head_dim]) and is loaded into shared memory once for the whole group (so each KV block is
// read once per GQA group and split). Warp w updates the online-softmax state (m, l, acc[head_dim])
// of heads w, w + 4, ...; a score is a warp-wide dot product. Output: per (token, head, split) the
// partial max m, sum l and unnormalized acc. Kernel 2 merges the splits:
//   out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M),  M = max_s m_s;
// empty splits (m = -inf, l = 0) weigh nothing, a token with no context gets zeros.
// Shared memory: (2 G + 2 * 16) * head_dim * 4 bytes (G = 4, head_dim = 128: 20 KiB).
// This is the simple correct version: scores use CUDA cores, not tensor cores, and a prefill token
// re-reads its context (no FlashAttention-2 tiling over query rows yet).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "backend/cuda/kernels.h"
#include "kv/kv_types.h"

namespace qs::cuda {
namespace {

constexpr int kWarps = 4;

__device__ __forceinline__ float load_as_float(const float* p) { return *p; }
__device__ __forceinline__ float load_as_float(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load_as_float(const __nv_bfloat16* p) { return __bfloat162float(*p); }

template <typename KvT>
__global__ void attention_split_kernel(const uint16_t* q, const KvT* k_cache, const KvT* v_cache,
                                       const int32_t* token_seq, const int32_t* context_lens,
                                       const int32_t* block_tables, int32_t max_blocks_per_seq, int32_t n_heads,
                                       int32_t n_kv_heads, int32_t head_dim, int32_t n_splits,
                                       int32_t blocks_per_split, float scale, float* m_out, float* l_out,
                                       float* acc_out) {
  extern __shared__ float smem[];
  const int32_t group = n_heads / n_kv_heads;
  float* q_s = smem;                                  // [group, head_dim]
  float* acc_s = q_s + group * head_dim;              // [group, head_dim]
  float* k_s = acc_s + group * head_dim;              // [16, head_dim]
  float* v_s = k_s + kKvBlockSize * head_dim;         // [16, head_dim]
  __shared__ float m_s[64], l_s[64];                  // group <= 64

  const int64_t t = blockIdx.x;
  const int32_t kvh = blockIdx.y, split = blockIdx.z;
  const int32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t ctx = context_lens[t];
  const int32_t seq = token_seq[t];
  const int32_t n_ctx_blocks = (ctx + kKvBlockSize - 1) / kKvBlockSize;
  const int32_t first = split * blocks_per_split;
  const int32_t last = min(first + blocks_per_split, n_ctx_blocks);

  const uint16_t* q_row = q + (t * n_heads + static_cast<int64_t>(kvh) * group) * head_dim;
  for (int32_t i = threadIdx.x; i < group * head_dim; i += blockDim.x) {
    q_s[i] = __uint_as_float(static_cast<uint32_t>(q_row[i]) << 16);
    acc_s[i] = 0.0f;
  }
  for (int32_t g = threadIdx.x; g < group; g += blockDim.x) {
    m_s[g] = -INFINITY;
    l_s[g] = 0.0f;
  }

  for (int32_t blk = first; blk < last; ++blk) {
    const int64_t phys = block_tables[static_cast<int64_t>(seq) * max_blocks_per_seq + blk];
    const int64_t base = (phys * n_kv_heads + kvh) * kKvBlockSize * head_dim;
    __syncthreads();  // q_s / acc_s initialised, or the previous block's k_s / v_s fully used
    for (int32_t i = threadIdx.x; i < kKvBlockSize * head_dim; i += blockDim.x) {
      k_s[i] = load_as_float(k_cache + base + i);
      v_s[i] = load_as_float(v_cache + base + i);
    }
    __syncthreads();
    const int32_t n_valid = min(kKvBlockSize, ctx - blk * kKvBlockSize);
    for (int32_t g = warp; g < group; g += kWarps) {
      float m = m_s[g], l = l_s[g];
      for (int32_t j = 0; j < n_valid; ++j) {
        float dot = 0.0f;
        for (int32_t d = lane; d < head_dim; d += 32) dot += q_s[g * head_dim + d] * k_s[j * head_dim + d];
        for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        const float s = dot * scale;
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);  // 0 when m = -inf
        const float p = expf(s - m_new);
        l = l * corr + p;
        for (int32_t d = lane; d < head_dim; d += 32) {
          acc_s[g * head_dim + d] = acc_s[g * head_dim + d] * corr + p * v_s[j * head_dim + d];
        }
        m = m_new;
      }
      __syncwarp();
      if (lane == 0) {
        m_s[g] = m;
        l_s[g] = l;
      }
    }
  }
  __syncthreads();
  for (int32_t g = 0; g < group; ++g) {
    const int64_t idx = (t * n_heads + static_cast<int64_t>(kvh) * group + g) * n_splits + split;
    if (threadIdx.x == 0) {
      m_out[idx] = m_s[g];
      l_out[idx] = l_s[g];
    }
    for (int32_t d = threadIdx.x; d < head_dim; d += blockDim.x) acc_out[idx * head_dim + d] = acc_s[g * head_dim + d];
  }
}

// Block (token, head), one thread per element of head_dim.
__global__ void attention_combine_kernel(const float* m_in, const float* l_in, const float* acc_in, int32_t n_heads,
                                         int32_t head_dim, int32_t n_splits, uint16_t* out) {
  const int64_t t = blockIdx.x;
  const int32_t h = blockIdx.y;
  const int64_t first = (t * n_heads + h) * n_splits;
  float big = -INFINITY;
  for (int32_t s = 0; s < n_splits; ++s) big = fmaxf(big, m_in[first + s]);
  for (int32_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    if (big != -INFINITY) {
      for (int32_t s = 0; s < n_splits; ++s) {
        const float w = expf(m_in[first + s] - big);  // 0 for an empty split
        num += w * acc_in[(first + s) * head_dim + d];
        den += w * l_in[first + s];
      }
    }
    const float v = den > 0.0f ? num / den : 0.0f;
    out[(t * n_heads + h) * head_dim + d] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
}

template <typename KvT>
void launch_split(const uint16_t* q, const void* k_cache, const void* v_cache, const int32_t* token_seq,
                  const int32_t* context_lens, const int32_t* block_tables, int32_t max_blocks_per_seq,
                  int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, int32_t n_splits,
                  int32_t blocks_per_split, const AttentionScratch& scratch, cudaStream_t stream) {
  const int32_t group = n_heads / n_kv_heads;
  const size_t smem = static_cast<size_t>(2 * group + 2 * kKvBlockSize) * head_dim * sizeof(float);
  if (smem > 48 * 1024) {
    (void)cudaFuncSetAttribute(attention_split_kernel<KvT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  }
  const dim3 grid(n_tokens, n_kv_heads, n_splits);
  attention_split_kernel<KvT><<<grid, kWarps * 32, smem, stream>>>(
      q, static_cast<const KvT*>(k_cache), static_cast<const KvT*>(v_cache), token_seq, context_lens, block_tables,
      max_blocks_per_seq, n_heads, n_kv_heads, head_dim, n_splits, blocks_per_split,
      1.0f / sqrtf(static_cast<float>(head_dim)), scratch.m, scratch.l, scratch.acc);
}

}  // namespace

void paged_attention(const uint16_t* q, const void* k_cache, const void* v_cache, KvType kv_type,
                     const int32_t* token_seq, const int32_t* context_lens, const int32_t* block_tables,
                     int32_t max_blocks_per_seq, int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads,
                     int32_t head_dim, int32_t n_splits, int32_t blocks_per_split, const AttentionScratch& scratch,
                     uint16_t* out, cudaStream_t stream) {
  if (n_tokens < 1) return;
  switch (kv_type) {
    case KvType::kF32:
      launch_split<float>(q, k_cache, v_cache, token_seq, context_lens, block_tables, max_blocks_per_seq, n_tokens,
                          n_heads, n_kv_heads, head_dim, n_splits, blocks_per_split, scratch, stream);
      break;
    case KvType::kF16:
      launch_split<__half>(q, k_cache, v_cache, token_seq, context_lens, block_tables, max_blocks_per_seq, n_tokens,
                           n_heads, n_kv_heads, head_dim, n_splits, blocks_per_split, scratch, stream);
      break;
    case KvType::kBF16:
      launch_split<__nv_bfloat16>(q, k_cache, v_cache, token_seq, context_lens, block_tables, max_blocks_per_seq,
                                  n_tokens, n_heads, n_kv_heads, head_dim, n_splits, blocks_per_split, scratch,
                                  stream);
      break;
  }
  const dim3 grid(n_tokens, n_heads);
  const int32_t threads = (head_dim + 31) / 32 * 32;
  attention_combine_kernel<<<grid, threads, 0, stream>>>(scratch.m, scratch.l, scratch.acc, n_heads, head_dim,
                                                         n_splits, out);
}

}  // namespace qs::cuda
