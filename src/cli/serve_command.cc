// `qwenserve serve`: load and warm up the model, then serve the OpenAI-compatible API and the
// web UI until SIGINT/SIGTERM (stop accepting, let in-flight requests finish within the grace
// period, cancel the rest, exit 0).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/runtime.h"
#include "core/error.h"
#include "engine/engine.h"
#include "metrics/server_metrics.h"
#include "server/http_server.h"
#include "server/web_assets.h"
#include "tokenizer/tokenizer.h"

namespace qs::cli {
namespace {

// Used when a model ships no chat template: plain ChatML, Qwen's conversation format.
constexpr const char* kChatMlTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + "
    "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

struct ServeOptions {
  RuntimeOptions runtime;
  ServerOptions server;
  int32_t max_num_seqs = 8;
  double shutdown_grace_s = 30;
  double keepalive_s = 5;
};

// Available memory from /proc/meminfo (bytes), or 0 when unknown.
size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// KV blocks: room for max_num_seqs full contexts, capped at a quarter of available memory but
// never less than one full context.
int32_t kv_blocks_for(const ModelConfig& config, const RuntimeOptions& rt, int32_t max_num_seqs, KvDType dtype) {
  const int64_t ctx = std::min<int64_t>(rt.ctx_size, config.max_position_embeddings);
  const int32_t one_context = KvCache::blocks_for_context(ctx);
  int64_t blocks = static_cast<int64_t>(one_context) * max_num_seqs;
  const size_t available = available_memory_bytes();
  if (available > 0) {
    blocks = std::min<int64_t>(blocks, static_cast<int64_t>(available / 4 / KvCache::bytes_per_block(config, dtype)));
  }
  return static_cast<int32_t>(std::max<int64_t>(blocks, one_context));
}

void warm_up(Engine& engine, const Tokenizer& tokenizer) {
  EngineRequest request;
  request.id = "warmup";
  request.prompt_ids = tokenizer.encode("Hello");
  request.max_tokens = 2;
  request.sampling.temperature = 0;
  auto stream = engine.submit(request);
  EngineEvent event;
  while (stream->pop(event, std::chrono::milliseconds(60000))) {
    if (event.kind != EngineEvent::Kind::kDelta) break;
  }
}

int run_serve(ServeOptions opt) {
  // Block SIGINT/SIGTERM in every thread; one thread waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto model = load_model(opt.runtime.model_path);
  const ModelConfig& config = model->config;
  const auto tokenizer = load_tokenizer(*model);
  const ChatTemplate chat_template(model->chat_template.empty() ? kChatMlTemplate : model->chat_template);
  const int64_t ctx = std::min<int64_t>(opt.runtime.ctx_size, config.max_position_embeddings);
  const KvDType kv_dtype = parse_kv_dtype(opt.runtime.kv_cache_type);
  ThreadPool pool(opt.runtime.threads > 0 ? opt.runtime.threads : default_thread_count());
  KvCache cache(config, kv_dtype, kv_blocks_for(config, opt.runtime, opt.max_num_seqs, kv_dtype));
  ModelRunner runner(config, model->weights, cache, pool, std::min<int64_t>(opt.runtime.batch_size, ctx), ctx);
  EngineOptions engine_options;
  engine_options.max_num_seqs = opt.max_num_seqs;
  engine_options.max_batched_tokens = opt.runtime.batch_size;
  Engine engine(runner, cache, *tokenizer, engine_options);
  metrics::ServerMetrics metrics;
  opt.server.keepalive_ms = static_cast<int64_t>(opt.keepalive_s * 1000);
  HttpServer server(opt.server, engine, *tokenizer, chat_template, metrics);
  server.set_static_files([](std::string_view path) -> const StaticFile* {
    static thread_local StaticFile file;
    const WebAsset* asset = find_web_asset(path);
    if (asset == nullptr) return nullptr;
    file = {asset->content_type, asset->body};
    return &file;
  });

  std::thread signal_thread([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    std::fprintf(stderr, "received signal %d: draining (grace %.0f s)\n", signal_number, opt.shutdown_grace_s);
    server.set_ready(false);
    server.stop();
    const auto deadline = SteadyClock::now() + std::chrono::duration<double>(opt.shutdown_grace_s);
    while (SteadyClock::now() < deadline) {
      const EngineStats st = engine.stats();
      if (st.running == 0 && st.waiting == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    engine.shutdown();  // whatever is left finishes with "cancelled"
  });

  warm_up(engine, *tokenizer);
  server.set_ready(true);
  std::fprintf(stderr, "qwenserve: serving %s as '%s' on http://%s:%d (context %lld tokens, KV %d blocks, %d threads)\n",
               model->path.c_str(), opt.server.served_model_name.c_str(), opt.server.host.c_str(),
               opt.server.port, static_cast<long long>(ctx), cache.n_blocks(), pool.n_threads());
  const bool ok = server.listen();
  if (!ok) {
    std::fprintf(stderr, "error: cannot listen on %s:%d\n", opt.server.host.c_str(), opt.server.port);
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
    return 1;
  }
  signal_thread.join();
  engine.shutdown();
  std::fprintf(stderr, "qwenserve: stopped\n");
  return 0;
}

}  // namespace

Command register_serve(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  opt->runtime.add_to(app);
  ServerOptions& s = opt->server;
  app.add_option("--host", s.host, "Address to bind")->capture_default_str();
  app.add_option("--port", s.port, "Port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--served-model-name", s.served_model_name, "Model name reported by the API")->capture_default_str();
  app.add_option("--api-key", s.api_key, "Require 'Authorization: Bearer KEY' on /v1 routes");
  app.add_option("--max-tokens-cap", s.max_tokens_cap, "Upper bound for max_tokens")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--default-max-tokens", s.default_max_tokens, "max_tokens when a request sets none")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-body-bytes", s.max_body_bytes, "Larger request bodies get 413")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--log-format", s.log_format, "Per-request log line on stderr")->check(CLI::IsMember({"json", "text", "none"}))->capture_default_str();
  app.add_option("--max-num-seqs", opt->max_num_seqs, "Sequences decoded together")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--keepalive", opt->keepalive_s, "Seconds between SSE keep-alive comments")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--shutdown-grace", opt->shutdown_grace_s, "Seconds in-flight requests may finish after SIGTERM")->check(CLI::NonNegativeNumber)->capture_default_str();
  return [opt] { return run_serve(*opt); };
}

}  // namespace qs::cli
