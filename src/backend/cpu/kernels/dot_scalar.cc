// Scalar reference dot kernels (no intrinsics). The integer formulas are the ones the SIMD paths
// must reproduce up to f32 summation order:
//   Q8_0 / Q4_0:  sum_b (d_w[b] * d_a[b]) * sum_i q_w[i] * q_a[i]
//   Q4_K / Q5_K:  sum_B d_a * (d * sum_j sc[j] * sum_{i in j} q[i] * q_a[i]
//                               - dmin * sum_j m[j] * (bsums[2j] + bsums[2j + 1]))
//   Q6_K:         sum_B d_a * d * sum_k scales[k] * sum_{i in k} (q[i] - 32) * q_a[i]
#include <cstring>

#include "backend/cpu/kernels/dot_kernels.h"
#include "formats/quantize.h"

namespace qs::kernels {
namespace {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// f32 weights may sit at any byte offset; 8 partial sums keep the scalar path reasonably fast.
float dot_f32_one(int64_t n, const uint8_t* w, const float* a) {
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      float v;
      std::memcpy(&v, w + 4 * (i + k), 4);
      partial[k] += v * a[i + k];
    }
  }
  float sum = ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
              ((partial[2] + partial[6]) + (partial[3] + partial[7]));
  for (; i < n; ++i) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    sum += v * a[i];
  }
  return sum;
}

template <bool kBf16>
float dot_half_one(int64_t n, const uint8_t* w, const float* a) {
  float partial[8] = {};
  int64_t i = 0;
  auto value = [&](int64_t k) {
    const uint16_t h = load_u16(w + 2 * k);
    return kBf16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
  };
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) partial[k] += value(i + k) * a[i + k];
  }
  float sum = ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
              ((partial[2] + partial[6]) + (partial[3] + partial[7]));
  for (; i < n; ++i) sum += value(i) * a[i];
  return sum;
}

float dot_q8_0_one(int64_t n, const uint8_t* w, const BlockQ8_0A* a) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += blocks[b].qs[i] * a[b].qs[i];
    sum += (fp16_to_fp32(blocks[b].d) * a[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float dot_q4_0_one(int64_t n, const uint8_t* w, const BlockQ8_0A* a) {
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(w);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kBlockQ8_0; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < 16; ++i) {
      isum += ((blocks[b].qs[i] & 0x0F) - 8) * a[b].qs[i];
      isum += ((blocks[b].qs[i] >> 4) - 8) * a[b].qs[i + 16];
    }
    sum += (fp16_to_fp32(blocks[b].d) * a[b].d) * static_cast<float>(isum);
  }
  return sum;
}

// Q4_K and Q5_K: q(element) supplied by `level`.
template <typename Block, typename Level>
float dot_min_scale_one(int64_t n, const uint8_t* w, const BlockQ8_K* a, Level level) {
  const auto* blocks = reinterpret_cast<const Block*>(w);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    const Block& x = blocks[b];
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, x.scales, &sc, &m);
      int32_t isum = 0;
      for (int i = 32 * j; i < 32 * j + 32; ++i) isum += level(x, i) * a[b].qs[i];
      scaled += sc * isum;
      mins += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
    const float d = fp16_to_fp32(x.d) * a[b].d;
    const float dmin = fp16_to_fp32(x.dmin) * a[b].d;
    sum += d * static_cast<float>(scaled) - dmin * static_cast<float>(mins);
  }
  return sum;
}

int q4_k_level(const BlockQ4_K& x, int i) {
  const int c = i / 64, l = i % 32;
  return (i % 64) < 32 ? (x.qs[32 * c + l] & 0x0F) : (x.qs[32 * c + l] >> 4);
}

int q5_k_level(const BlockQ5_K& x, int i) {
  const int c = i / 64, l = i % 32, upper = (i % 64) >= 32;
  const int low = upper ? (x.qs[32 * c + l] >> 4) : (x.qs[32 * c + l] & 0x0F);
  return low | (((x.qh[l] >> (2 * c + upper)) & 1) << 4);
}

float dot_q6_k_one(int64_t n, const uint8_t* w, const BlockQ8_K* a) {
  const auto* blocks = reinterpret_cast<const BlockQ6_K*>(w);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kBlockK; ++b) {
    const BlockQ6_K& x = blocks[b];
    int32_t isum[16] = {};
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x.ql + 64 * h;
      const uint8_t* qh = x.qh + 32 * h;
      const int8_t* q8 = a[b].qs + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int s = 8 * h + l / 16;
        isum[s] += (((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32) * q8[l];
        isum[s + 2] += (((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32) * q8[l + 32];
        isum[s + 4] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * q8[l + 64];
        isum[s + 6] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * q8[l + 96];
      }
    }
    int32_t total = 0;
    for (int k = 0; k < 16; ++k) total += x.scales[k] * isum[k];
    sum += (fp16_to_fp32(x.d) * a[b].d) * static_cast<float>(total);
  }
  return sum;
}

// Adapts a one-row dot to the RowDotFn signature.
template <typename Act, float (*kOne)(int64_t, const uint8_t*, const Act*)>
void row_dot(int64_t n, const void* w, const void* act, size_t stride, int n_act, float* out) {
  for (int t = 0; t < n_act; ++t) {
    const auto* a = reinterpret_cast<const Act*>(static_cast<const uint8_t*>(act) + t * stride);
    out[t] = kOne(n, static_cast<const uint8_t*>(w), a);
  }
}

float dot_f16_one(int64_t n, const uint8_t* w, const float* a) { return dot_half_one<false>(n, w, a); }
float dot_bf16_one(int64_t n, const uint8_t* w, const float* a) { return dot_half_one<true>(n, w, a); }
float dot_q4_k_one(int64_t n, const uint8_t* w, const BlockQ8_K* a) {
  return dot_min_scale_one<BlockQ4_K>(n, w, a, q4_k_level);
}
float dot_q5_k_one(int64_t n, const uint8_t* w, const BlockQ8_K* a) {
  return dot_min_scale_one<BlockQ5_K>(n, w, a, q5_k_level);
}

}  // namespace

const DotKernels& scalar_dot_kernels() {
  static const DotKernels table = {
      CpuIsa::kScalar,
      row_dot<float, dot_f32_one>,
      row_dot<float, dot_f16_one>,
      row_dot<float, dot_bf16_one>,
      row_dot<BlockQ8_0A, dot_q8_0_one>,
      row_dot<BlockQ8_0A, dot_q4_0_one>,
      row_dot<BlockQ8_K, dot_q4_k_one>,
      row_dot<BlockQ8_K, dot_q5_k_one>,
      row_dot<BlockQ8_K, dot_q6_k_one>,
      quantize_row_q8_0a,
      quantize_row_q8_k,
  };
  return table;
}

}  // namespace qs::kernels
