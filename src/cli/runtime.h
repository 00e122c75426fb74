// What every model-running command sets up: the loaded model and a prepared backend (chosen by
// --device through backend/backend_factory.h) with KV storage sized for the requested context.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "backend/factory/backend_factory.h"
#include "kv/kv_types.h"
#include "model/model_loader.h"
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
  std::string device = "cpu";    // --device cpu|cuda
  double gpu_memory_utilization = 0.9;  // --gpu-memory-utilization (cuda)
  bool enforce_eager = false;           // --enforce-eager (cuda: no CUDA graphs)

  /// Adds --model, --device, --threads, --ctx-size, --batch-size, --kv-cache-type, --no-mmap,
  /// --mlock, --quantize, --gpu-memory-utilization, --enforce-eager and --no-thread-pinning to `command`.
  void add_to(CLI::App& command);

  /// The backend options these flags ask for: `threads` (default: all usable CPUs; a warning when
  /// it exceeds them), pinning unless --no-thread-pinning, and `worker_nice`.
  BackendOptions backend_options(int worker_nice = 0) const;
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

/// The context length in tokens: --ctx-size, capped at the model's max_position_embeddings (at
/// least 1). A cap prints one warning line on stderr naming both values (llama.cpp warns too;
/// positions past the trained length would give meaningless RoPE angles).
int64_t context_tokens(const RuntimeOptions& options, const ModelConfig& config);

struct Runtime {
  std::unique_ptr<LoadedModel> model;
  std::unique_ptr<QuantizedWeights> quantized;  // set with --quantize; model->weights point here
  std::unique_ptr<Backend> backend;             // prepared, with KV storage
  int64_t ctx_tokens = 0;                       // context of one sequence
  int threads = 0;                              // compute threads of the backend
};

/// Loads the model and prepares the backend for one sequence of `ctx_size` tokens (capped by the
/// model's max_position_embeddings), batches of --batch-size tokens. `check_model`, when set, is
/// called with the loaded model's config before the context is capped and the KV cache sized (a
/// command's own checks against the model, e.g. bench's longest test). Throws qs::Error.
Runtime make_runtime(const RuntimeOptions& options,
                     const std::function<void(const ModelConfig&)>& check_model = {});

}  // namespace qs::cli
