// The seam between the engine and the hardware: the engine drives a Backend; a backend owns the
// prepared weights, the KV storage, the per-step activations and the kernels of one device.
//
// Contract (every backend; tests/backend/conformance_test.cc checks it per registered backend):
//   - prepare() once, then allocate_kv() once, then any number of steps;
//   - a step is launch(batch, sampling, out) then wait(); between them the caller may do host work
//     (e.g. for the next step) but must not touch `batch`, `sampling` or `out`, with one
//     exception: the rows of `sampling.allowed_mask` (already sized by the caller) may be filled
//     until wait() is called, because a backend reads the masks only in wait(), when it samples.
//     So structured-output masks are computed while the forward pass runs (as XGrammar overlaps
//     them with the GPU step). forward() = launch + wait. The CPU backend runs the forward pass
//     in launch() and samples in wait();
//   - KV storage per layer: K and V [n_blocks, n_kv_heads, kKvBlockSize, head_dim] in the
//     KvDType chosen at allocate_kv; block ids come from the engine's BlockManager (the only
//     allocator), rows are addressed through StepBatch::slot_mapping / block_tables;
//   - results: StepOutput as documented in backend/sampling_batch.h. batch_invariant() backends
//     return bit-identical logits for a sequence whatever else is in the batch.
// Errors: qs::Error for invalid batches (token id outside the vocabulary, position beyond the
// context, block table not covering a position, batch above max_batch_tokens or max_seqs), for invalid
// sampling rows, and for device failures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "backend/sampling_batch.h"
#include "backend/step_batch.h"
#include "kv/kv_types.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace qs {

struct BackendLimits {
  int64_t max_batch_tokens = 512;     // tokens per step at most (StepBatch::n_tokens)
  int64_t max_context_tokens = 4096;  // positions per sequence at most
  int32_t max_seqs = 16;              // sequences per step at most
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// "cpu", "cuda".
  virtual std::string_view name() const = 0;
  /// One line naming the kernel paths in use, for `info` and the server's startup line
  /// (e.g. "cpu: matmul=avx2 attention=avx2 norm=avx2 rope=avx2 convert=avx2, 2 threads").
  virtual std::string describe() const = 0;
  /// True when a sequence's logits do not depend on the batch around it (bit-identical).
  virtual bool batch_invariant() const = 0;

  /// Takes the model (which must outlive the backend) and sizes activations for `limits`.
  /// Throws qs::Error for unsupported shapes or weight types.
  virtual void prepare(const ModelConfig& config, const ModelWeights& weights, const BackendLimits& limits) = 0;
  /// Bytes one KV block takes across all layers, K and V, in `dtype`.
  virtual size_t kv_bytes_per_block(KvDType dtype) const = 0;
  /// KV blocks the backend's device memory can hold once prepare() has placed the weights and
  /// activations (a GPU backend: what --gpu-memory-utilization leaves, vLLM's rule); 0 for a
  /// backend in host memory, whose caller sizes the cache from its own budget (kv/kv_budget.h).
  virtual int32_t kv_blocks_for_device_memory(KvDType dtype) const { return 0; }
  /// Allocates the KV storage of `n_blocks` blocks (block ids [0, n_blocks)). Throws qs::Error
  /// when n_blocks < 1, the dtype does not suit the model, or memory runs out.
  virtual void allocate_kv(int32_t n_blocks, KvDType dtype) = 0;
  virtual int32_t kv_blocks() const = 0;
  /// Bytes of KV storage allocated (0 before allocate_kv).
  virtual size_t kv_allocated_bytes() const = 0;
  /// The limits given to prepare() and the model's logits rows per token (vocab_size).
  virtual const BackendLimits& limits() const = 0;
  virtual int32_t vocab_rows() const = 0;

  /// Starts a step. See the file comment; `out` is resized by the backend.
  virtual void launch(const StepBatch& batch, const SamplingBatch& sampling, StepOutput& out) = 0;
  /// Waits for the step started by the last launch(). Rethrows its error.
  virtual void wait() = 0;
  void forward(const StepBatch& batch, const SamplingBatch& sampling, StepOutput& out) {
    launch(batch, sampling, out);
    wait();
  }
};

}  // namespace qs
