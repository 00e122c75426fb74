#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <string>
#include <utility>

#include "backend/cpu/kernels/kernel_paths.h"
#include "core/error.h"

namespace qs {

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : options_(options), pool_(std::make_unique<ThreadPool>(std::max(options.n_threads, 1))) {
  if (options.pin_threads) pool_->pin_workers_to_cpus();
  if (options.worker_nice > 0) {
    const int nice = options.worker_nice;
    pool_->parallel_for(pool_->n_threads(), [nice](int64_t, int64_t, int thread) {
      if (thread != 0) lower_thread_priority(nice);
    });
  }
}

const ModelConfig& CpuBackend::config() const {
  if (config_ == nullptr) throw Error("cpu backend: prepare() was not called");
  return *config_;
}

std::string CpuBackend::describe() const {
  std::string packed;
  if (runner_ && runner_->packed_tensors() > 0) {
    packed = ", " + std::to_string(runner_->packed_tensors()) + " matrices packed in 16-row groups (" +
             std::to_string(runner_->packed_bytes() >> 20) + " MiB), " + runner_->decode_prefetch().describe();
  }
  return "cpu (" + std::to_string(pool_->n_threads()) + " threads, " + kernels::cpu_kernel_paths() + packed + ")";
}

void CpuBackend::prepare(const ModelConfig& config, const ModelWeights& weights, const BackendLimits& limits) {
  if (limits.max_batch_tokens < 1 || limits.max_context_tokens < 1 || limits.max_seqs < 1) {
    throw Error("cpu backend: batch, context and sequence limits must be positive");
  }
  config_ = &config;
  limits_ = limits;
  runner_ = std::make_unique<ModelRunner>(config, weights, *pool_, limits.max_batch_tokens, limits.max_context_tokens);
}

size_t CpuBackend::kv_bytes_per_block(KvDType dtype) const { return kv_bytes_per_block_dense(config(), dtype); }

void CpuBackend::allocate_kv(int32_t n_blocks, KvDType dtype) {
  kv_ = std::make_unique<CpuKvStorage>(config(), dtype, n_blocks);
}

void CpuBackend::launch(const StepBatch& batch, const SamplingBatch& sampling, StepOutput& out) {
  error_ = nullptr;
  pending_sampling_ = &sampling;
  pending_out_ = &out;
  try {
    if (!runner_ || !kv_) throw Error("cpu backend: prepare() and allocate_kv() must come before a step");
    if (static_cast<int32_t>(sampling.rows.size()) != batch.n_logits()) {
      throw Error("cpu backend: " + std::to_string(sampling.rows.size()) + " sampling rows for " +
                  std::to_string(batch.n_logits()) + " logits rows");
    }
    if (batch.n_seqs() > limits_.max_seqs) {
      throw Error("cpu backend: " + std::to_string(batch.n_seqs()) + " sequences in a step exceed max_seqs " +
                  std::to_string(limits_.max_seqs));
    }
    if (sampling.vocab_rows != config_->vocab_size) {
      throw Error("cpu backend: sampling vocab_rows " + std::to_string(sampling.vocab_rows) + " != the model's " +
                  std::to_string(config_->vocab_size));
    }
    const size_t need = static_cast<size_t>(batch.n_logits()) * static_cast<size_t>(config_->vocab_size);
    if (logits_.size() < need) logits_.resize(need);
    runner_->forward(batch, *kv_, logits_.data());
  } catch (...) {
    error_ = std::current_exception();
  }
}

void CpuBackend::wait() {
  const SamplingBatch* sampling = std::exchange(pending_sampling_, nullptr);
  StepOutput* out = std::exchange(pending_out_, nullptr);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  if (sampling == nullptr || out == nullptr) throw Error("cpu backend: wait() without launch()");
  // Sampling runs here, after the forward: the allowed-token masks may be filled until now.
  sampler_.sample(*sampling, logits_.data(), *out);
}

}  // namespace qs
