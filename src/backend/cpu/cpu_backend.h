// The CPU backend: today's forward pass (model_runner.h), kernels (kernels/), thread pool and KV
// storage behind the Backend interface. launch() runs the forward pass (on the calling thread and
// the pool's workers); wait() samples on the host (cpu_sampler.h), so the caller may still fill
// the allowed-token masks between the two.
// Batch-invariant: a sequence's logits are bit-identical whatever else is in the step (the
// kernels' fixed accumulation order, kernels/matmul.h).
#pragma once

#include <exception>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_sampler.h"
#include "backend/cpu/kv_storage.h"
#include "backend/cpu/model_runner.h"
#include "core/thread_pool.h"

namespace qs {

struct CpuBackendOptions {
  int n_threads = 1;         // compute threads, the caller of launch() included
  bool pin_threads = true;   // pin workers to CPUs of the affinity mask (ThreadPool)
  int worker_nice = 0;       // > 0: workers lower their Linux nice value (HTTP threads stay above)
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options);

  std::string_view name() const override { return "cpu"; }
  std::string describe() const override;
  bool batch_invariant() const override { return true; }
  void prepare(const ModelConfig& config, const ModelWeights& weights, const BackendLimits& limits) override;
  size_t kv_bytes_per_block(KvDType dtype) const override;
  void allocate_kv(int32_t n_blocks, KvDType dtype) override;
  int32_t kv_blocks() const override { return kv_ ? kv_->n_blocks() : 0; }
  size_t kv_allocated_bytes() const override { return kv_ ? kv_->total_bytes() : 0; }
  const BackendLimits& limits() const override { return limits_; }
  int32_t vocab_rows() const override { return static_cast<int32_t>(config().vocab_size); }
  void launch(const StepBatch& batch, const SamplingBatch& sampling, StepOutput& out) override;
  void wait() override;

  ThreadPool& pool() { return *pool_; }

 private:
  const ModelConfig& config() const;

  CpuBackendOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  const ModelConfig* config_ = nullptr;
  BackendLimits limits_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<CpuKvStorage> kv_;
  CpuSampler sampler_;
  std::vector<float> logits_;  // [n_logits, vocab] of the current step
  std::exception_ptr error_;   // the failure of the last launch(), rethrown by wait()
  const SamplingBatch* pending_sampling_ = nullptr;  // of the launched step, sampled in wait()
  StepOutput* pending_out_ = nullptr;
};

}  // namespace qs
