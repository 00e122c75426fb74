// A Backend wrapper for engine tests whose outcome must not depend on thread timing: launch()
// blocks until open() has been called, so a test can submit all its requests before the engine's
// first step (on a loaded machine the engine thread could otherwise finish early requests before
// the test thread submitted the later ones). Every other call goes to the wrapped backend.
#pragma once

#include <condition_variable>
#include <mutex>

#include "backend/backend.h"

namespace qs {

class GatedBackend final : public Backend {
 public:
  explicit GatedBackend(Backend& inner) : inner_(inner) {}

  /// Lets launch() proceed (now and from then on).
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    cv_.notify_all();
  }

  std::string_view name() const override { return inner_.name(); }
  std::string describe() const override { return inner_.describe(); }
  bool batch_invariant() const override { return inner_.batch_invariant(); }
  void prepare(const ModelConfig& config, const ModelWeights& weights, const BackendLimits& limits) override {
    inner_.prepare(config, weights, limits);
  }
  size_t kv_bytes_per_block(KvDType dtype) const override { return inner_.kv_bytes_per_block(dtype); }
  int32_t kv_blocks_for_device_memory(KvDType dtype) const override { return inner_.kv_blocks_for_device_memory(dtype); }
  void allocate_kv(int32_t n_blocks, KvDType dtype) override { inner_.allocate_kv(n_blocks, dtype); }
  int32_t kv_blocks() const override { return inner_.kv_blocks(); }
  size_t kv_allocated_bytes() const override { return inner_.kv_allocated_bytes(); }
  const BackendLimits& limits() const override { return inner_.limits(); }
  int32_t vocab_rows() const override { return inner_.vocab_rows(); }
  void launch(const StepBatch& batch, const SamplingBatch& sampling, StepOutput& out) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return open_; });
    }
    inner_.launch(batch, sampling, out);
  }
  void wait() override { inner_.wait(); }

 private:
  Backend& inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool open_ = false;
};

}  // namespace qs
