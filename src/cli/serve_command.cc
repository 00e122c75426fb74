// `qwenserve serve`: load and warm up the model, then serve the OpenAI-compatible API and the
// web UI until SIGINT/SIGTERM (stop accepting, let in-flight requests finish within the grace
// period, cancel the rest, exit 0). A configuration that cannot work (bad --host, busy --port, KV
// budget beyond physical memory, too many HTTP threads) or a failed allocation at startup prints
// "error: ..." and exits 1 before serving anything.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <memory>
#include <functional>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/number_validators.h"
#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/runtime.h"
#include "cli/draft_model.h"
#include "cli/spec_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "kv/kv_budget.h"
#include "metrics/server_metrics.h"
#include "server/http_server.h"
#include "server/http_worker_pool.h"
#include "server/listen_address.h"
#include "server/routes/cors.h"
#include "server/web_assets.h"
#include "tokenizer/tokenizer.h"

namespace qs::cli {
namespace {

// Used when a model ships no chat template: plain ChatML, Qwen's conversation format.
constexpr const char* kChatMlTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + "
    "'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

constexpr int kComputeNice = 5;  // nice value of the engine and matmul threads (HTTP threads: 0)

struct ServeOptions {
  RuntimeOptions runtime;
  ServerOptions server;
  std::vector<std::string> served_model_names{"qwenserve"};  // first: reported; others: aliases
  EngineOptions engine;            // max_num_seqs, max_batched_tokens, queue limits, guard
  std::string kv_cache_memory;     // empty: a quarter of available memory (see kv_budget.h)
  bool no_prefix_cache = false;
  bool no_output_guard = false;
  double shutdown_grace_s = 30;
  double keepalive_s = 5;
  std::string metrics_compat = "none";  // "vllm": /metrics also writes vLLM's names
  std::string response_cache_size = "0";  // --response-cache-size (parse_byte_size)
  std::string chat_template_file;         // --chat-template: replaces the model's template
  CLI::Option* max_num_seqs_option = nullptr;
  CLI::Option* api_key_option = nullptr;
  CLI::Option* max_batched_tokens_option = nullptr;
  CLI::Option* batch_size_option = nullptr;
  SpecFlags spec;
};

// The chat template: --chat-template FILE, else the model's, else ChatML. Errors name the option.
ChatTemplate load_chat_template(const ServeOptions& opt, const std::string& from_model) {
  if (opt.chat_template_file.empty()) return ChatTemplate(from_model.empty() ? kChatMlTemplate : from_model);
  std::ifstream in(opt.chat_template_file, std::ios::binary);
  std::ostringstream source;
  if (!in || !(source << in.rdbuf())) throw Error("--chat-template: cannot read " + opt.chat_template_file);
  try {
    return ChatTemplate(source.str());
  } catch (const Error& e) {
    throw Error("--chat-template " + opt.chat_template_file + ": " + e.what());
  }
}

// KV blocks: --kv-cache-memory, else a quarter of available memory capped at max_num_seqs full
// contexts (never less than one context).
// A device backend (cuda) sizes the cache from its free device memory unless --kv-cache-memory is given.
int32_t kv_blocks_for(const Backend& backend, const ServeOptions& opt, int64_t ctx, KvDType dtype) {
  if (opt.kv_cache_memory.empty()) {
    const int32_t device_blocks = backend.kv_blocks_for_device_memory(dtype);
    if (device_blocks > 0) return device_blocks;
  }
  KvBudgetInput in;
  in.bytes_per_block = backend.kv_bytes_per_block(dtype);
  in.ctx_tokens = ctx;
  in.max_num_seqs = opt.engine.max_num_seqs;
  if (!opt.kv_cache_memory.empty()) in.budget_bytes = parse_byte_size(opt.kv_cache_memory);
  in.available_bytes = available_memory_bytes();
  in.physical_bytes = physical_memory_bytes();
  return kv_blocks_for_budget(in);
}

std::string spec_summary(const SpecDecodeOptions& spec, const DraftModel& draft) {
  if (!spec.enabled()) return "speculative decoding off";
  const std::string drafts = spec.adaptive ? " x up to " + std::to_string(spec.draft_max) + " drafts (adaptive)"
                                           : " x " + std::to_string(spec.draft_max) + " drafts";
  if (spec.draft_model) return "speculative decoding with " + draft.describe() + drafts;
  return "speculative decoding ngram " + std::to_string(spec.ngram_min) + ".." + std::to_string(spec.ngram_max) + drafts;
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

// Checks that need no model, so that a bad configuration fails before a long model load. Throws
// qs::Error.
void check_configuration(ServeOptions& opt) {
  // An empty key would turn authentication off without a word (e.g. --api-key "$UNSET_VARIABLE").
  if (opt.api_key_option != nullptr && opt.api_key_option->count() > 0 && opt.server.api_key.empty()) {
    throw Error("--api-key: the key is empty, which would leave the API open; give a key, or omit --api-key");
  }
  // A GPU batches far more than a CPU: vLLM-like defaults on --device cuda unless set.
  if (opt.runtime.device == "cuda") {
    if (opt.max_num_seqs_option->count() == 0) opt.engine.max_num_seqs = 128;
    if (opt.max_batched_tokens_option->count() == 0 && opt.batch_size_option->count() == 0) {
      opt.engine.max_batched_tokens = 2048;
    }
  }
  if (opt.served_model_names.empty() ||
      std::find(opt.served_model_names.begin(), opt.served_model_names.end(), "") != opt.served_model_names.end()) {
    throw Error("--served-model-name: names must not be empty");
  }
  opt.server.served_model_name = opt.served_model_names.front();
  opt.server.served_model_aliases.assign(opt.served_model_names.begin() + 1, opt.served_model_names.end());
  // One HTTP thread per running or waiting request plus spares (see http_worker_pool.h).
  opt.server.http_threads = http_worker_threads(opt.engine.max_num_seqs, opt.engine.max_queue);
  try {
    opt.server.response_cache_bytes = parse_byte_size(opt.response_cache_size);
  } catch (const Error& e) {
    throw Error(std::string("--response-cache-size: ") + e.what());
  }
  // A bound below one entry (its request key, text and token ids: a few KiB for a short chat)
  // would cache nothing and say nothing: almost always a size given without its unit.
  constexpr uint64_t kMinResponseCacheBytes = 4096;
  if (opt.server.response_cache_bytes > 0 && opt.server.response_cache_bytes < kMinResponseCacheBytes) {
    throw Error("--response-cache-size: " + std::to_string(opt.server.response_cache_bytes) +
                " bytes cannot hold a cached response (an entry is a few KiB); give at least 4KiB, with a unit, "
                "e.g. 64MiB (0 turns the cache off)");
  }
  if (!opt.kv_cache_memory.empty()) {
    const size_t budget = parse_byte_size(opt.kv_cache_memory);
    check_kv_budget_fits(budget, physical_memory_bytes(), available_memory_bytes());
  }
  const std::string problem = listen_address_problem(opt.server.host, opt.server.port);
  if (!problem.empty()) {
    throw Error("cannot listen on " + opt.server.host + ":" + std::to_string(opt.server.port) + ": " + problem);
  }
}

// Waits for SIGINT/SIGTERM (blocked in every thread) on its own thread, then drains the server.
// A second signal during the drain (Ctrl-C twice, as uvicorn and vLLM read it) exits at once with
// status 128 + signal, without finishing the drain; otherwise the drain is bounded by
// --shutdown-grace. Started before the model loads (run_serve decides what a first signal does at
// each stage); if startup fails, the destructor wakes it without doing anything.
class SignalWatcher {
 public:
  SignalWatcher(const sigset_t& signals, std::function<void(int signal_number)> on_signal)
      : thread_([this, signals, on_signal = std::move(on_signal)] {
          int signal_number = 0;
          sigwait(&signals, &signal_number);
          if (abandoned_.load()) return;
          // Signals stay blocked everywhere, so the next one goes to the only thread in sigwait.
          force_ = std::thread([this, signals] {
            int again = 0;
            sigwait(&signals, &again);
            if (abandoned_.load()) return;
            process_log::warning("received signal " + std::to_string(again) +
                                 " again: exiting now without finishing the drain");
            std::_Exit(128 + again);
          });
          on_signal(signal_number);
        }) {}
  ~SignalWatcher() {
    if (!thread_.joinable()) return;
    abandoned_.store(true);
    pthread_kill(thread_.native_handle(), SIGTERM);  // wakes its sigwait, if it is still there
    thread_.join();
    stop_force();
  }
  /// Waits until a signal was handled (the drain is over).
  void join() {
    thread_.join();
    abandoned_.store(true);
    stop_force();
  }

 private:
  void stop_force() {
    if (!force_.joinable()) return;
    pthread_kill(force_.native_handle(), SIGTERM);  // a thread-directed signal only it can take
    force_.join();
  }

  std::atomic<bool> abandoned_{false};
  std::thread force_;  // started by thread_ after the first signal, before the drain
  std::thread thread_;
};

int run_serve(ServeOptions opt) {
  // Block SIGINT/SIGTERM in every thread; one thread waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // The lifecycle lines and a fatal error (main.cc) follow --log-format from here on.
  process_log::use_json(opt.server.log_format == "json");
  // From here a signal is taken at once: before the server is bound (loading a model can take
  // minutes) it ends the process as the signal's default action would; once `drain` is set it
  // drains. `drain_mutex` is held while the drain runs, so the objects it uses outlive it.
  std::mutex drain_mutex;
  std::function<void(int)> drain;
  SignalWatcher signal_watcher(signals, [&](int signal_number) {
    std::lock_guard lock(drain_mutex);
    if (drain) {
      drain(signal_number);
      return;
    }
    process_log::info("received signal " + std::to_string(signal_number) + " while starting: exiting");
    std::signal(signal_number, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal_number);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    raise(signal_number);
    std::_Exit(128 + signal_number);  // not reached
  });
  check_configuration(opt);
  std::string draft_path;
  const SpecDecodeOptions spec = opt.spec.resolve(&draft_path);  // a bad --speculative-config fails before loading

  const char* stage = "loading the model";
  try {
    RuntimeModel loaded = load_runtime_model(opt.runtime);  // --no-mmap, --mlock, --quantize
    const auto& model = loaded.model;
    const ModelConfig& config = model->config;
    const auto tokenizer = load_tokenizer(*model);
    const ChatTemplate chat_template = load_chat_template(opt, model->chat_template);
    const int64_t ctx = context_tokens(opt.runtime, config);
    const KvDType kv_dtype = parse_kv_dtype(opt.runtime.kv_cache_type);
    stage = "starting the compute threads";
    // Compute threads run below the HTTP threads (see lower_thread_priority): the engine thread
    // lowers itself, the backend its workers.
    const std::unique_ptr<Backend> backend = make_backend(opt.runtime.backend_options(kComputeNice));
    EngineOptions engine_options = opt.engine;
    // --batch-size (shared with generate) is the old name of --max-batched-tokens.
    if (opt.max_batched_tokens_option->count() == 0 && opt.batch_size_option->count() > 0) {
      engine_options.max_batched_tokens = opt.runtime.batch_size;
    }
    engine_options.prefix_caching = !opt.no_prefix_cache;
    engine_options.guard.enabled = !opt.no_output_guard;
    engine_options.thread_nice = kComputeNice;
    engine_options.spec = spec;
    engine_options.itl_limit_s = opt.server.slo_itl_ms / 1000.0;
    if (opt.server.response_cache_bytes > 0 && !backend->batch_invariant()) {
      throw Error("--response-cache-size: the " + backend->describe() +
                  " backend is not batch-invariant (a response depends on what else runs in its batch), so "
                  "cached responses could differ from fresh ones; run without --response-cache-size");
    }
    stage = "preparing the backend";
    backend->prepare(config, model->weights,
                     BackendLimits{std::min<int64_t>(engine_options.max_batched_tokens, ctx), ctx,
                                   std::max<int32_t>(engine_options.max_num_seqs, 1)});
    const int32_t kv_blocks = kv_blocks_for(*backend, opt, ctx, kv_dtype);
    try {
      backend->allocate_kv(kv_blocks, kv_dtype);
    } catch (const std::bad_alloc&) {
      throw Error("cannot allocate the KV cache (" + std::to_string(kv_blocks) + " blocks of " +
                  std::to_string(kKvBlockSize) + " tokens): lower --kv-cache-memory or --ctx-size");
    }
    DraftModel draft;
    if (spec.draft_model) {
      stage = "loading the draft model";
      // As many KV blocks as the target's, plus room for the k - 1 drafts of every sequence.
      draft = load_draft_model(draft_path, opt.runtime, *model, *tokenizer, backend->limits(),
                               kv_blocks + 2 * backend->limits().max_seqs, kComputeNice);
    }
    stage = "starting the engine";
    Engine engine(*backend, *tokenizer, engine_options, draft.backend.get());
    metrics::ExportOptions export_options;
    export_options.vllm_compat = opt.metrics_compat == "vllm";
    export_options.model_name = opt.server.served_model_name;
    export_options.kv_block_size = kKvBlockSize;
    export_options.kv_blocks = backend->kv_blocks();
    metrics::ServerMetrics metrics(metrics::steady_clock_now, {}, export_options);
    metrics.set_slo(opt.server.slo_ttft_ms / 1000.0, opt.server.slo_itl_ms / 1000.0);
    opt.server.keepalive_ms = static_cast<int64_t>(opt.keepalive_s * 1000);
    stage = "starting the HTTP server";
    HttpServer server(opt.server, engine, *tokenizer, chat_template, metrics);
    server.set_static_files([](std::string_view path) -> const StaticFile* {
      static thread_local StaticFile file;
      const WebAsset* asset = find_web_asset(path);
      if (asset == nullptr) return nullptr;
      file = {asset->content_type, asset->body};
      return &file;
    });
    server.bind();  // throws "cannot listen on HOST:PORT: <reason>", or when threads cannot start

    // Cleared (after any drain in progress) before the objects the drain uses go away.
    struct DrainScope {
      std::mutex& mutex;
      std::function<void(int)>& drain;
      ~DrainScope() {
        std::lock_guard lock(mutex);
        drain = nullptr;
      }
    } drain_scope{drain_mutex, drain};
    std::unique_lock set_drain(drain_mutex);
    drain = [&](int signal_number) {
      char grace[32];
      std::snprintf(grace, sizeof grace, "%g", opt.shutdown_grace_s);  // 0.5 stays 0.5
      process_log::info("received signal " + std::to_string(signal_number) + ": draining (grace " + grace + " s)");
      // New requests get 503 + Retry-After while the admitted ones finish; then stop listening.
      server.begin_draining();
      const auto deadline = SteadyClock::now() + std::chrono::duration<double>(opt.shutdown_grace_s);
      while (SteadyClock::now() < deadline) {
        const EngineStats st = engine.stats();
        if (st.waiting == 0 && st.in_flight == 0) break;  // waiting also counts requests being prepared
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      engine.shutdown();  // whatever is left finishes with "cancelled"
      server.stop();  // also when the signal came before listen() started (see HttpServer::stop())
    };
    set_drain.unlock();
    stage = "warming up";
    warm_up(engine, *tokenizer);
    server.set_ready(true);
    char kv_mib[32];
    std::snprintf(kv_mib, sizeof(kv_mib), "%.1f", backend->kv_allocated_bytes() / 1048576.0);
    process_log::info("serving " + model->path + " as '" + opt.server.served_model_name + "' on http://" + opt.server.host + ":" +
              std::to_string(server.bound_port()) + " (context " + std::to_string(engine.context_tokens()) +
              " tokens, KV " + std::to_string(backend->kv_blocks()) + " blocks = " +
              std::to_string(static_cast<long long>(backend->kv_blocks()) * kKvBlockSize) + " tokens, " + kv_mib +
              " MiB, prefix cache " + (engine_options.prefix_caching ? "on" : "off") + ", " +
              spec_summary(engine_options.spec, draft) + ", " + std::to_string(opt.server.http_threads) +
              " HTTP threads; backend " + backend->describe() + ")");
    stage = "serving";
    if (!server.listen()) {
      engine.shutdown();
      throw Error("cannot accept connections on " + opt.server.host + ":" + std::to_string(server.bound_port()));
    }
    signal_watcher.join();
    engine.shutdown();
  } catch (const std::bad_alloc&) {
    throw Error(std::string("out of memory while ") + stage +
                " (lower --kv-cache-memory, --ctx-size, --max-batched-tokens or --max-num-seqs)");
  }
  process_log::info("stopped");
  return 0;
}

}  // namespace

Command register_serve(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  opt->runtime.add_to(app);
  ServerOptions& s = opt->server;
  app.add_option("--host", s.host, "Address to bind")->capture_default_str();
  app.add_option("--port", s.port, "Port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--served-model-name", opt->served_model_names,
                 "Model name(s) a request's \"model\" may name (absent also accepted; others get 404); the "
                 "first is reported by the API")
      ->capture_default_str();
  app.add_option("--chat-template", opt->chat_template_file,
                 "Jinja chat template file used instead of the model's (as vLLM's --chat-template)");
  opt->api_key_option = app.add_option("--api-key", s.api_key, "Require 'Authorization: Bearer KEY' on /v1 routes");
  app.add_option("--allowed-origins", s.allowed_origins,
                 "CORS: browser origins (scheme://host[:port], or * for any) that may call the API; default none")
      ->delimiter(',')
      ->check([](const std::string& origin) { return cors_origin_problem(origin); });
  app.add_option("--max-tokens-cap", s.max_tokens_cap, "Upper bound for max_tokens")->check(kPositive)->capture_default_str();
  app.add_option("--default-max-tokens", s.default_max_tokens, "max_tokens when a request sets none")->check(kPositive)->capture_default_str();
  app.add_option("--max-body-bytes", s.max_body_bytes, "Larger request bodies get 413")->check(kPositive)->capture_default_str();
  app.add_option("--log-format", s.log_format, "Per-request log line on stderr")->check(CLI::IsMember({"json", "text", "none"}))->capture_default_str();
  EngineOptions& e = opt->engine;
  e.max_queue = 256;
  opt->max_num_seqs_option =
      app.add_option("--max-num-seqs", e.max_num_seqs, "Sequences decoded together (--device cuda: 128 unless set)")
          ->check(kPositive)->capture_default_str();
  opt->max_batched_tokens_option =
      app.add_option("--max-batched-tokens", e.max_batched_tokens,
                     "Tokens per forward step: decode tokens + prefill chunks (chunked prefill; "
                     "--device cuda: 2048 unless set)")
          ->check(kPositive)->capture_default_str();
  app.add_option("--mask-threads", e.mask_threads,
                 "Threads computing structured-output token masks while the backend runs a step (0: on "
                 "the engine thread after the step)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--prefill-slack", e.prefill_slack,
                 "A step that prefills next to running decodes may take (1 + X) times a decode-only "
                 "step (chunk size learned from measured step times; keeps ITL flat). 0: chunks of "
                 "--max-batched-tokens")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--prefill-min-chunk", e.prefill_min_chunk,
                 "Fewest prefill tokens a step next to decodes may carry, whatever --prefill-slack allows "
                 "(lower only when a chunk this size would exceed --slo-itl-ms)")
      ->check(kPositive)->capture_default_str();
  opt->batch_size_option = app.get_option("--batch-size");
  opt->batch_size_option->description("Old name of --max-batched-tokens (used when that is not given)");
  app.add_option("--kv-cache-memory", opt->kv_cache_memory,
                 "KV cache size in bytes, e.g. 2GiB, 512MiB, 4GB (default: 1/4 of available memory, "
                 "capped at --max-num-seqs full contexts)");
  app.add_flag("--no-prefix-cache", opt->no_prefix_cache, "Disable automatic prefix caching (KV reuse of shared prompt prefixes)");
  app.add_option("--max-queue", e.max_queue, "Requests that may wait to start; more get 429 (0: no limit)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--max-queue-wait", e.max_queue_wait_s,
                 "Seconds a request may wait to start before it gets 429 (0: no limit); streams then "
                 "begin only once the request runs")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--request-timeout", s.request_timeout_s,
                 "Seconds a request may take in all (0: no limit); also caps a request's \"timeout\" field")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--request-head-timeout", s.request_head_timeout_s,
                 "Seconds a client may take to send a request's head (request line and headers), "
                 "however slowly it trickles; then the connection is closed (0: no limit)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--request-body-timeout", s.request_body_timeout_s,
                 "Seconds a client may take to send a request's body after its head; then the "
                 "connection is closed (0: no limit)")
      ->check(kNonNegative)->capture_default_str();
  app.add_flag("--no-output-guard", opt->no_output_guard,
               "Disable the degenerate-output guard (see --guard-blank-run, --guard-ngram-repeats)");
  app.add_option("--guard-blank-run", e.guard.max_blank_run,
                 "Stop (finish_reason length) after more than N consecutive whitespace/punctuation-only tokens (0: off)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--guard-ngram-repeats", e.guard.ngram_repeats,
                 "Stop (finish_reason length) when one n-gram repeats N times in a row (0: off)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--guard-max-ngram", e.guard.max_ngram, "Longest n-gram (tokens) the repetition guard checks")
      ->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--metrics-compat", opt->metrics_compat,
                 "vllm: /metrics also writes vLLM's names (vllm:num_requests_waiting, ...) with a model_name "
                 "label, for the llm-d Endpoint Picker's default engine and vLLM dashboards")
      ->check(CLI::IsMember({"none", "vllm"}))->capture_default_str();
  app.add_option("--slo-ttft-ms", s.slo_ttft_ms,
                 "TTFT SLO in ms: a request whose predicted time to first token exceeds it gets 429 with "
                 "Retry-After at once (a request's \"slo_ttft_ms\" overrides it; 0: off)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--slo-itl-ms", s.slo_itl_ms,
                 "Mean inter-token latency SLO in ms, for goodput metrics; also caps prefill chunks below "
                 "--prefill-min-chunk when that floor alone would exceed it (0: off)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--response-cache-size", opt->response_cache_size,
                 "Bytes of exact-match response cache for deterministic requests, e.g. 64MiB (0: off; needs a "
                 "batch-invariant backend)");
  app.add_option("--degrade-at-kv", s.degrade_at_kv,
                 "Degrade service (lower default max_tokens, no thinking) while this fraction of KV blocks is in use (0: off)")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--degrade-at-queue", s.degrade_at_queue, "Degrade service while this many requests wait (0: off)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--degraded-max-tokens", s.degraded_max_tokens, "Default max_tokens while degraded")
      ->check(kPositive)->capture_default_str();
  app.add_option("--keepalive", opt->keepalive_s, "Seconds between SSE keep-alive comments")->check(kPositive)->capture_default_str();
  app.add_option("--shutdown-grace", opt->shutdown_grace_s, "Seconds in-flight requests may finish after SIGTERM")->check(kNonNegative)->capture_default_str();
  opt->spec.add_to(app);
  return [opt] { return run_serve(*opt); };
}

}  // namespace qs::cli
