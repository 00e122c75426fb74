// Device sampling (kernels.h: sample_rows). One thread block of 1024 threads per logits row.
//
// Steps, in backend/sampling_batch.h's order: (1) processed = raw with disallowed tokens at -inf;
// (2) logit bias; (3) repetition penalty over prompt + output tokens (HF / CTRL rule: l / p for
// l > 0, l * p otherwise); (4) l -= count * frequency + (count > 0) * presence over output tokens
// (OpenAI's rule); (5) argmax, or softmax(l / T) restricted by top-k, top-p (smallest head of the
// sorted distribution with mass >= p, after top-k) and min-p (p >= min_p * p_max), renormalized,
// one inverse-CDF draw in token-id order with u = philox::uniform(seed, draws).
// Cut-offs: a bisection over the 32-bit order-preserving key of the logits (32 block reductions
// per cut-off) instead of a sort; ties at a cut-off are all kept.
// The random stream differs from the CPU backend's (mt19937_64): same seed, same tokens holds per
// backend, not across backends.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/kernels.h"
#include "backend/cuda/philox.h"

namespace qs::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T partial[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  T total = partial[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) total = op(total, partial[w]);
  return total;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct SumIntOp {
  __device__ int operator()(int a, int b) const { return a + b; }
};
// (value, id) packed as a 64-bit key: larger value wins, then lower id.
struct ArgmaxOp {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const { return a > b ? a : b; }
};

__global__ void mask_bias_kernel(SamplingBuffers b, int32_t vocab) {
  const int64_t r = blockIdx.x;
  const DeviceSamplingRow row = b.rows[r];
  const float* raw = b.raw + r * vocab;
  float* out = b.processed + r * vocab;
  const int32_t words = (vocab + 31) / 32;
  const uint32_t* mask = row.mask_row >= 0 ? b.masks + static_cast<int64_t>(row.mask_row) * words : nullptr;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const bool allowed = mask == nullptr || ((mask[i / 32] >> (i % 32)) & 1u) != 0;
    out[i] = allowed ? raw[i] : -INFINITY;
  }
  __syncthreads();
  for (int32_t j = threadIdx.x; j < row.bias_len; j += blockDim.x) {
    atomicAdd(out + b.bias_ids[row.bias_begin + j], b.bias_values[row.bias_begin + j]);
  }
}

__global__ void penalty_kernel(SamplingBuffers b, int32_t vocab) {
  const int64_t r = blockIdx.x;
  const DeviceSamplingRow row = b.rows[r];
  const bool active = row.repetition_penalty != 1.0f || row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f;
  if (!active) return;  // uniform over the block
  int32_t* counts = b.counts + r * vocab;
  constexpr int32_t kInPrompt = 1 << 30;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) counts[i] = 0;
  __syncthreads();
  for (int32_t j = threadIdx.x; j < row.prompt_len; j += blockDim.x) atomicOr(counts + b.history[row.prompt_begin + j], kInPrompt);
  for (int32_t j = threadIdx.x; j < row.output_len; j += blockDim.x) atomicAdd(counts + b.history[row.output_begin + j], 1);
  __syncthreads();
  float* l = b.processed + r * vocab;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const int32_t c = counts[i] & (kInPrompt - 1);
    const bool seen = counts[i] != 0;
    float v = l[i];
    if (seen && row.repetition_penalty != 1.0f) v = v > 0.0f ? v / row.repetition_penalty : v * row.repetition_penalty;
    v -= static_cast<float>(c) * row.frequency_penalty + (c > 0 ? row.presence_penalty : 0.0f);
    l[i] = v;
  }
}

__global__ void sample_kernel(SamplingBuffers b, int32_t vocab) {
  const int64_t r = blockIdx.x;
  const DeviceSamplingRow row = b.rows[r];
  const float* raw = b.raw + r * vocab;
  const float* l = b.processed + r * vocab;
  __shared__ float chunk_sum[kThreads];
  __shared__ int32_t picked;

  // log_softmax of the raw row, for the sampled token's logprob.
  float raw_max = -INFINITY;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) raw_max = fmaxf(raw_max, raw[i]);
  raw_max = block_reduce(raw_max, MaxOp{});
  float raw_sum = 0.0f;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) raw_sum += expf(raw[i] - raw_max);
  raw_sum = block_reduce(raw_sum, SumOp{});

  // NaN / +inf anywhere, or nothing finite: refused (the host throws).
  int bad = 0;
  float mx = -INFINITY;
  unsigned long long best = 0;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = l[i];
    if (isnan(v) || v == INFINITY) bad = 1;
    mx = fmaxf(mx, v);
    const unsigned long long key = (static_cast<unsigned long long>(order_key(v)) << 32) |
                                   static_cast<uint32_t>(0x7FFFFFFF - i);  // lower id wins ties
    best = best > key ? best : key;
  }
  bad = block_reduce(bad, SumIntOp{});
  mx = block_reduce(mx, MaxOp{});
  best = block_reduce(best, ArgmaxOp{});
  if (bad != 0 || mx == -INFINITY) {
    if (threadIdx.x == 0) {
      b.sampled[r] = -1;
      b.sampled_logprob[r] = 0.0f;
    }
    return;
  }
  const bool greedy = row.temperature == 0.0f || row.top_k == 1;
  int32_t token = 0;
  if (greedy) {
    token = 0x7FFFFFFF - static_cast<int32_t>(best & 0xFFFFFFFFull);
  } else {
    const float inv_t = 1.0f / row.temperature;
    // top-k: the key of the k-th largest logit (largest K with count(key >= K) >= k).
    uint32_t cut = 0;
    if (row.top_k > 0 && row.top_k < vocab) {
      uint32_t ans = 0;
      for (int bit = 31; bit >= 0; --bit) {
        const uint32_t cand = ans | (1u << bit);
        int n = 0;
        for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) n += order_key(l[i]) >= cand ? 1 : 0;
        if (block_reduce(n, SumIntOp{}) >= row.top_k) ans = cand;
      }
      cut = ans;
    }
    // top-p over the top-k survivors: largest K >= cut whose head holds >= top_p of their mass.
    if (row.top_p < 1.0f) {
      float z = 0.0f;
      for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
        if (order_key(l[i]) >= cut) z += expf((l[i] - mx) * inv_t);
      }
      z = block_reduce(z, SumOp{});
      // mass(key >= max(K, cut)) is z (>= top_p z) for K <= cut and falls as K grows.
      uint32_t ans = 0;
      for (int bit = 31; bit >= 0; --bit) {
        const uint32_t cand = ans | (1u << bit);
        const uint32_t eff = cand > cut ? cand : cut;
        float mass = 0.0f;
        for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
          if (order_key(l[i]) >= eff) mass += expf((l[i] - mx) * inv_t);
        }
        if (block_reduce(mass, SumOp{}) >= row.top_p * z) ans = cand;
      }
      cut = ans > cut ? ans : cut;
    }
    // min-p: weight e^((l - max) / T) >= min_p (the largest weight is 1).
    const float min_w = row.min_p > 0.0f ? row.min_p : 0.0f;
    // Inverse CDF in token-id order: per-thread contiguous chunks, a serial scan of the chunk sums.
    const int32_t chunk = (vocab + kThreads - 1) / kThreads;
    const int32_t begin = min(vocab, static_cast<int32_t>(threadIdx.x) * chunk);
    const int32_t end = min(vocab, begin + chunk);
    float s = 0.0f;
    for (int32_t i = begin; i < end; ++i) {
      const float w = expf((l[i] - mx) * inv_t);
      if (order_key(l[i]) >= cut && w >= min_w) s += w;
    }
    chunk_sum[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
      float total = 0.0f;
      for (int c = 0; c < kThreads; ++c) total += chunk_sum[c];
      const float u = static_cast<float>(philox::uniform(row.seed, row.draws)) * total;
      float acc = 0.0f;
      int c = 0;
      while (c < kThreads - 1 && acc + chunk_sum[c] <= u) acc += chunk_sum[c++];
      // Walk chunk c; if rounding leaves u past its end, the last kept token of the row wins.
      int32_t chosen = -1, last_kept = -1;
      for (int32_t i = min(vocab, c * chunk); i < vocab; ++i) {
        const float w = expf((l[i] - mx) * inv_t);
        if (order_key(l[i]) < cut || w < min_w) continue;
        last_kept = i;
        acc += w;
        if (acc > u) {
          chosen = i;
          break;
        }
      }
      picked = chosen >= 0 ? chosen : last_kept;
    }
    __syncthreads();
    token = picked;
  }
  if (threadIdx.x == 0) {
    b.sampled[r] = token;
    b.sampled_logprob[r] = token >= 0 ? raw[token] - raw_max - logf(raw_sum) : 0.0f;
  }
}

}  // namespace

void sample_rows(const SamplingBuffers& b, int32_t n_rows, int32_t vocab, bool any_penalty, cudaStream_t stream) {
  if (n_rows < 1) return;
  mask_bias_kernel<<<n_rows, kThreads, 0, stream>>>(b, vocab);
  if (any_penalty) penalty_kernel<<<n_rows, kThreads, 0, stream>>>(b, vocab);
  sample_kernel<<<n_rows, kThreads, 0, stream>>>(b, vocab);
}

}  // namespace qs::cuda
