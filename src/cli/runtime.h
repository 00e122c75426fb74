// What every model-running command sets up: the loaded model, a thread pool, a KV cache sized for
// the requested context and a ModelRunner.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model_loader.h"
#include "backend/cpu/model_runner.h"
#include "quantize/model_quantizer.h"

namespace qs::cli {

struct RuntimeOptions {
  std::string model_path;
  int threads = 0;               // 0: all online CPUs
  int64_t ctx_size = 4096;       // tokens of context (capped by max_position_embeddings)
  int64_t batch_size = 512;      // prefill chunk, tokens per forward pass
  std::string kv_cache_type = "f16";
  bool no_mmap = false;          // read weight files into RAM instead of mapping them
  bool mlock = false;            // lock weights in RAM
  std::string quantize;          // empty, or a mix name (quant/quantize_policy.h)
  bool no_thread_pinning = false;  // leave the compute workers unpinned

  /// Adds --model, --threads, --ctx-size, --batch-size, --kv-cache-type, --no-mmap, --mlock,
  /// --quantize and --no-thread-pinning to `command`.
  void add_to(CLI::App& command);

  /// A pool of `threads` (default: all CPUs) compute threads, workers pinned unless
  /// --no-thread-pinning.
  std::unique_ptr<ThreadPool> make_pool() const;
};

/// A model as the runtime options load it: `model->weights` points to the quantized copies when
/// --quantize was given (kept alive by `quantized`).
struct RuntimeModel {
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<QuantizedWeights> quantized;
};

/// Loads options.model_path honouring --no-mmap / --mlock, then quantizes the weight matrices in
/// memory per --quantize (threads: options.threads). Throws qs::Error.
RuntimeModel load_runtime_model(const RuntimeOptions& options);

struct Runtime {
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<QuantizedWeights> quantized;  // set with --quantize; model->weights point here
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<ModelRunner> runner;
};

/// Loads the model and allocates everything for one sequence of `ctx_size` tokens.
/// Throws qs::Error.
Runtime make_runtime(const RuntimeOptions& options);

}  // namespace qs::cli
