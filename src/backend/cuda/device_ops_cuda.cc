#include "backend/cuda/device_ops.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "formats/dtype.h"

namespace qs::cuda_ops {
namespace {

using cuda::check;

// A device copy of a host vector, freed on destruction.
template <typename T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) { check(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc"); }
  explicit Dev(const std::vector<T>& host) : Dev(host.size()) {
    check(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    check(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return host;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = fp32_to_bf16(v[i]);
  return out;
}

std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_fp32(v[i]);
  return out;
}

void finish(const char* what) {
  cuda::check_launch(what);
  check(cudaDeviceSynchronize(), what);
}

}  // namespace

std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w, int32_t rows, int32_t hidden,
                            float eps) {
  Dev<float> dx(x), dw(w);
  Dev<uint16_t> out(static_cast<size_t>(rows) * hidden);
  cuda::rms_norm(dx.get(), nullptr, dw.get(), rows, hidden, eps, out.get(), nullptr);
  finish("rms_norm");
  return from_bf16(out.download());
}

std::vector<float> silu_mul(const std::vector<float>& gate_up, int32_t tokens, int32_t inter) {
  Dev<float> dg(gate_up);
  Dev<uint16_t> out(static_cast<size_t>(tokens) * inter);
  cuda::silu_mul(dg.get(), tokens, inter, out.get(), nullptr);
  finish("silu_mul");
  return from_bf16(out.download());
}

std::vector<float> gemm(const std::vector<float>& w, const std::vector<float>& x, int32_t n, int32_t k, int32_t t) {
  Dev<uint16_t> dw(to_bf16(w)), dx(to_bf16(x));
  Dev<float> d(static_cast<size_t>(t) * n);
  cuda::LtGemm lt;
  lt.run(dw.get(), dx.get(), d.get(), n, k, t, false, nullptr);
  finish("gemm");
  return d.download();
}

std::vector<float> paged_attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                                   const std::vector<float>& v_cache, const std::vector<int32_t>& token_seq,
                                   const std::vector<int32_t>& context_lens, const std::vector<int32_t>& block_tables,
                                   int32_t max_blocks_per_seq, int32_t n_tokens, int32_t n_heads, int32_t n_kv_heads,
                                   int32_t head_dim, int32_t n_splits, int32_t blocks_per_split) {
  Dev<uint16_t> dq(to_bf16(q));
  Dev<float> dk(k_cache), dv(v_cache);
  Dev<int32_t> dseq(token_seq), dctx(context_lens), dtab(block_tables);
  const size_t rows = static_cast<size_t>(n_tokens) * n_heads * n_splits;
  Dev<float> m(rows), l(rows), acc(rows * head_dim);
  Dev<uint16_t> out(static_cast<size_t>(n_tokens) * n_heads * head_dim);
  cuda::paged_attention(dq.get(), dk.get(), dv.get(), cuda::KvType::kF32, dseq.get(), dctx.get(), dtab.get(),
                        max_blocks_per_seq, n_tokens, n_heads, n_kv_heads, head_dim, n_splits, blocks_per_split,
                        cuda::AttentionScratch{m.get(), l.get(), acc.get()}, out.get(), nullptr);
  finish("paged_attention");
  return from_bf16(out.download());
}

std::vector<int32_t> sample(const std::vector<float>& logits, int32_t n_rows, int32_t vocab, float temperature,
                            int32_t top_k, float top_p, float min_p, uint64_t seed, uint64_t draws) {
  Dev<float> raw(logits), processed(logits.size());
  Dev<int32_t> counts(logits.size()), sampled(static_cast<size_t>(n_rows));
  Dev<float> logprob(static_cast<size_t>(n_rows));
  std::vector<cuda::DeviceSamplingRow> host_rows(static_cast<size_t>(n_rows));
  for (cuda::DeviceSamplingRow& r : host_rows) {
    r = cuda::DeviceSamplingRow{temperature, top_p, min_p, 1.0f, 0.0f, 0.0f, top_k, -1, seed, draws, 0, 0, 0, 0, 0, 0};
  }
  Dev<cuda::DeviceSamplingRow> rows(host_rows);
  cuda::SamplingBuffers b;
  b.raw = raw.get();
  b.processed = processed.get();
  b.counts = counts.get();
  b.rows = rows.get();
  b.sampled = sampled.get();
  b.sampled_logprob = logprob.get();
  cuda::sample_rows(b, n_rows, vocab, false, nullptr);
  finish("sample_rows");
  return sampled.download();
}

}  // namespace qs::cuda_ops
