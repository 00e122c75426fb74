#include "cli/runtime.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/number_validators.h"
#include "core/error.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"

namespace qs::cli {

void RuntimeOptions::add_to(CLI::App& command) {
  command.add_option("-m,--model", model_path, "GGUF file or Hugging Face model directory")
      ->required();
  command.add_option("--device", device, "Where the model runs: cpu, or cuda (in a build with CUDA support)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  command.add_option("-t,--threads", threads, "Worker threads (default: all CPUs)")
      ->check(kNonNegative);
  command.add_option("-c,--ctx-size", ctx_size, "Context length in tokens")
      ->check(kPositive)
      ->capture_default_str();
  command.add_option("-b,--batch-size", batch_size, "Prefill chunk: tokens per forward pass")
      ->check(kPositive)
      ->capture_default_str();
  command.add_option("--kv-cache-type", kv_cache_type,
                     "KV cache element type: f16, bf16, q8_0 (half the bytes of f16) or f32")
      ->check(CLI::IsMember({"f16", "bf16", "q8_0", "f32"}))
      ->capture_default_str();
  command.add_flag("--no-mmap", no_mmap,
                   "Read the weights into RAM instead of memory-mapping the files (mapped pages can "
                   "be evicted under page-cache pressure)");
  command.add_flag("--mlock", mlock, "Lock the weights in RAM (needs `ulimit -l` >= model size)");
  command.add_option("--quantize", quantize,
                     "Quantize the weight matrices at load time: q8_0, q4_0, q4_k_m, q5_k_m, q6_k, "
                     "bf16, f16, f32 (as `qwenserve quantize --type`)")
      ->check(CLI::IsMember(quant_mix_names()));
  command.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                     "--device cuda: share of the GPU's memory this process may use; the paged KV cache "
                     "takes what the weights and activations leave (vLLM's flag)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  command.add_flag("--enforce-eager", enforce_eager,
                   "--device cuda: launch every step's kernels one by one (no CUDA graphs; vLLM's flag)");
  command.add_flag("--no-thread-pinning", no_thread_pinning,
                   "Do not pin the compute worker threads to CPUs (pinning is skipped anyway when "
                   "--threads exceeds the CPUs this process may use)");
}

BackendOptions RuntimeOptions::backend_options(int worker_nice) const {
  const int usable = default_thread_count();
  if (threads > usable) {
    process_log::warning("--threads " + std::to_string(threads) + " exceeds the " + std::to_string(usable) +
                         " CPUs this process may use; the compute threads will time-share CPUs and every forward "
                         "pass waits for the slowest (expect several times slower steps)");
  }
  BackendOptions out;
  out.device = device;
  out.threads = threads > 0 ? threads : usable;
  out.pin_threads = !no_thread_pinning;
  out.gpu_memory_utilization = gpu_memory_utilization;
  out.enforce_eager = enforce_eager;
  out.worker_nice = worker_nice;
  return out;
}

RuntimeModel load_runtime_model(const RuntimeOptions& options) {
  MappedFile::set_default_options(MapOptions{options.no_mmap, options.mlock});
  RuntimeModel out;
  out.model = load_model(options.model_path);
  if (options.quantize.empty()) return out;
  const std::optional<QuantMix> mix = parse_quant_mix(options.quantize);
  if (!mix) throw Error("--quantize: unknown type '" + options.quantize + "'");
  ThreadPool pool(options.threads > 0 ? options.threads : default_thread_count());
  out.quantized = quantize_weights(*out.model, *mix, pool, stderr);
  out.model->weights = out.quantized->weights;
  if (options.mlock) {
    for (const std::vector<uint8_t>& bytes : out.quantized->data) {
      if (::mlock(bytes.data(), bytes.size()) != 0) {
        process_log::warning(std::string("mlock of quantized weights failed: ") + std::strerror(errno) +
                             "; continuing unlocked");
        break;
      }
    }
  }
  return out;
}

int64_t context_tokens(const RuntimeOptions& options, const ModelConfig& config) {
  const int64_t trained = std::max<int64_t>(config.max_position_embeddings, 1);
  if (options.ctx_size > trained) {
    process_log::warning("--ctx-size " + std::to_string(options.ctx_size) + " exceeds the model's max_position_embeddings " +
                         std::to_string(trained) + "; using " + std::to_string(trained));
  }
  return std::min<int64_t>(options.ctx_size, trained);
}

Runtime make_runtime(const RuntimeOptions& options, const std::function<void(const ModelConfig&)>& check_model) {
  Runtime rt;
  const BackendOptions backend_options = options.backend_options();
  rt.threads = backend_options.threads;
  rt.backend = make_backend(backend_options);  // before loading: a bad --device fails fast
  RuntimeModel loaded = load_runtime_model(options);
  rt.model = std::move(loaded.model);
  rt.quantized = std::move(loaded.quantized);
  const ModelConfig& config = rt.model->config;
  if (check_model) check_model(config);
  const int64_t ctx = context_tokens(options, config);
  rt.ctx_tokens = ctx;
  rt.backend->prepare(config, rt.model->weights, BackendLimits{std::min(options.batch_size, ctx), ctx, 1});
  rt.backend->allocate_kv(kv_blocks_for_context(ctx), parse_kv_dtype(options.kv_cache_type));
  return rt;
}

}  // namespace qs::cli
