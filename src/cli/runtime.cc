#include "cli/runtime.h"

#include <algorithm>

#include "core/error.h"

namespace qs::cli {

void RuntimeOptions::add_to(CLI::App& command) {
  command.add_option("-m,--model", model_path, "GGUF file or Hugging Face model directory")
      ->required();
  command.add_option("-t,--threads", threads, "Worker threads (default: all CPUs)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("-c,--ctx-size", ctx_size, "Context length in tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("-b,--batch-size", batch_size, "Prefill chunk: tokens per forward pass")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--kv-cache-type", kv_cache_type, "KV cache element type")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
}

Runtime make_runtime(const RuntimeOptions& options) {
  Runtime rt;
  rt.model = load_model(options.model_path);
  const ModelConfig& config = rt.model->config;
  const int64_t ctx = std::min<int64_t>(options.ctx_size, std::max<int64_t>(
                                                              config.max_position_embeddings, 1));
  rt.pool = std::make_unique<ThreadPool>(options.threads > 0 ? options.threads
                                                             : default_thread_count());
  rt.cache = std::make_unique<KvCache>(config, parse_kv_dtype(options.kv_cache_type),
                                       KvCache::blocks_for_context(ctx));
  rt.runner = std::make_unique<ModelRunner>(config, rt.model->weights, *rt.cache, *rt.pool,
                                            std::min(options.batch_size, ctx), ctx);
  return rt;
}

}  // namespace qs::cli
