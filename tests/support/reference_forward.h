// Float64 reference forward pass of a Qwen3 / Qwen2 decoder given as ModelConfig + ModelWeights
// (e.g. the in-memory RandomModel), for checking backends' logits. The C++ twin of
// tests/reference/qwen_reference.py, written from Hugging Face transformers' modeling_qwen3.py /
// modeling_qwen2.py; it shares no code with the backends (weights are only decoded to float with
// formats/dequantize_row, which is exact for F32 / F16 / BF16).
//
// Forward pass (double throughout; x is [n, hidden]):
//   x = E[tokens]
//   per layer:
//     h = rmsnorm(x) * w_attn_norm                 rmsnorm(x) = x / sqrt(mean(x^2) + eps)
//     q = h Wq^T (+ bq), k = h Wk^T (+ bk), v = h Wv^T (+ bv)       biases: Qwen2 only
//     Qwen3 only: per head, q = rmsnorm(q) * w_q_norm, k = rmsnorm(k) * w_k_norm (over head_dim)
//     q, k = rope(q), rope(k)     NeoX "rotate half": pair (i, i + d/2) turned by pos * theta^(-2i/d)
//     query head h attends with kv head h / (heads / kv_heads): softmax(q.k / sqrt(d)) over keys
//     j <= i (causal), weighted sum of v
//     x = x + attn Wo^T;  h = rmsnorm(x) * w_ffn_norm;  x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T
//   logits = (rmsnorm(x) * w_final_norm) W_out^T   (W_out = lm_head, the embedding when tied)
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "formats/dtype.h"
#include "formats/tensor.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace qs::reference {

/// All elements of `t` as double, row-major. Throws std::invalid_argument for a null tensor.
inline std::vector<double> to_double(const TensorView* t) {
  if (t == nullptr) throw std::invalid_argument("reference: missing tensor");
  const int64_t rows = t->rows(), cols = t->cols();
  const size_t stride = row_bytes(t->dtype, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t->dtype, t->data + r * stride, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = row[c];
  }
  return out;
}

/// y [n, out] = x [n, in] W^T (+ bias [out]) for W [out, in].
inline std::vector<double> linear(const std::vector<double>& x, int64_t n, const TensorView* w,
                                  const TensorView* bias = nullptr) {
  const std::vector<double> wd = to_double(w);
  const int64_t out_dim = w->rows(), in_dim = w->cols();
  const std::vector<double> b = bias ? to_double(bias) : std::vector<double>(out_dim, 0.0);
  std::vector<double> y(static_cast<size_t>(n * out_dim));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < out_dim; ++o) {
      double s = b[o];
      for (int64_t k = 0; k < in_dim; ++k) s += x[i * in_dim + k] * wd[o * in_dim + k];
      y[i * out_dim + o] = s;
    }
  }
  return y;
}

/// In place over consecutive rows of `dim` values: v = v / sqrt(mean(v^2) + eps) * weight.
inline void rmsnorm(std::vector<double>& v, int64_t dim, const std::vector<double>& weight, double eps) {
  for (size_t base = 0; base < v.size(); base += static_cast<size_t>(dim)) {
    double ss = 0;
    for (int64_t k = 0; k < dim; ++k) ss += v[base + k] * v[base + k];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t k = 0; k < dim; ++k) v[base + k] = v[base + k] * inv * weight[k];
  }
}

/// NeoX RoPE in place on [n, heads, d] at positions 0..n-1.
inline void rope(std::vector<double>& v, int64_t n, int64_t heads, int64_t d, double theta) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      double* x = v.data() + (i * heads + h) * d;
      for (int64_t k = 0; k < half; ++k) {
        const double angle = static_cast<double>(i) * std::pow(theta, -2.0 * static_cast<double>(k) / d);
        const double c = std::cos(angle), s = std::sin(angle);
        const double x1 = x[k], x2 = x[k + half];
        x[k] = x1 * c - x2 * s;
        x[k + half] = x2 * c + x1 * s;
      }
    }
  }
}

/// Logits [tokens.size(), vocab] (row-major, double) of one sequence at positions 0..n-1.
/// Throws std::invalid_argument for an empty sequence or a token outside the vocabulary.
inline std::vector<double> logits(const ModelConfig& c, const ModelWeights& w, std::span<const int32_t> tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw std::invalid_argument("reference: empty sequence");
  const int64_t hidden = c.hidden_size, H = c.num_attention_heads, KV = c.num_key_value_heads, d = c.head_dim;
  const double eps = c.rms_norm_eps;
  const std::vector<double> embed = to_double(w.embed_tokens);
  std::vector<double> x(static_cast<size_t>(n * hidden));
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) throw std::invalid_argument("reference: token outside vocab");
    for (int64_t k = 0; k < hidden; ++k) x[i * hidden + k] = embed[tokens[i] * hidden + k];
  }
  for (const LayerWeights& L : w.layers) {
    std::vector<double> h = x;
    rmsnorm(h, hidden, to_double(L.attn_norm), eps);
    std::vector<double> q = linear(h, n, L.q_proj, L.q_bias);
    std::vector<double> k = linear(h, n, L.k_proj, L.k_bias);
    const std::vector<double> v = linear(h, n, L.v_proj, L.v_bias);
    if (c.has_qk_norm()) {
      rmsnorm(q, d, to_double(L.q_norm), eps);
      rmsnorm(k, d, to_double(L.k_norm), eps);
    }
    rope(q, n, H, d, c.rope_theta);
    rope(k, n, KV, d, c.rope_theta);
    std::vector<double> attn(static_cast<size_t>(n * H * d), 0.0);
    std::vector<double> p(static_cast<size_t>(n));
    for (int64_t hq = 0; hq < H; ++hq) {
      const int64_t hk = hq / (H / KV);
      for (int64_t i = 0; i < n; ++i) {
        double max_s = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t t = 0; t < d; ++t) s += q[(i * H + hq) * d + t] * k[(j * KV + hk) * d + t];
          p[j] = s / std::sqrt(static_cast<double>(d));
          max_s = std::max(max_s, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - max_s));
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t t = 0; t < d; ++t) attn[(i * H + hq) * d + t] += p[j] / sum * v[(j * KV + hk) * d + t];
        }
      }
    }
    const std::vector<double> o = linear(attn, n, L.o_proj);
    for (size_t e = 0; e < x.size(); ++e) x[e] += o[e];
    h = x;
    rmsnorm(h, hidden, to_double(L.ffn_norm), eps);
    std::vector<double> g = linear(h, n, L.gate_proj);
    const std::vector<double> u = linear(h, n, L.up_proj);
    for (size_t e = 0; e < g.size(); ++e) g[e] = g[e] / (1.0 + std::exp(-g[e])) * u[e];
    const std::vector<double> down = linear(g, n, L.down_proj);
    for (size_t e = 0; e < x.size(); ++e) x[e] += down[e];
  }
  rmsnorm(x, hidden, to_double(w.final_norm), eps);
  return linear(x, n, w.lm_head != nullptr ? w.lm_head : w.embed_tokens);
}

}  // namespace qs::reference
