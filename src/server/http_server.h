// The OpenAI-compatible HTTP front end (cpp-httplib): routes, auth, validation, SSE streaming,
// health/readiness, Prometheus metrics and rolling latency stats.
//
// Routes (one handler each, under server/routes/): POST /v1/chat/completions, POST /v1/completions
// (generation_routes.h), GET /v1/models, GET /v1/models/{model} (model_routes.h), POST /tokenize,
// POST /detokenize (tokenize_routes.h), GET /health, GET /ready (health_routes.h), GET /metrics,
// GET /stats (metrics_routes.h), the header checks before routing (pre_routing.h) and static files
// from set_static_files() for anything else, 405 + Allow for a route's path with another method
// (fallback_route.h). Errors use OpenAI's shape
// {"error": {"message", "type", "param", "code"}}: 400 for an invalid body or Content-Length, 401
// without the --api-key, 404 for an unknown route or model, 413 / 415 / 429 / 503 as documented in
// the README. Every request answered with an error that did not reach the engine gets one log line
// (rejection_log.h) when log_format is not "none", written where the error is answered.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "metrics/server_metrics.h"
#include "server/rejection_log.h"
#include "server/routes/route_methods.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace qs {

class LazyGrammarCompiler;

class HttpWorkerPool;
struct GenerationRouteContext;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;                   // empty: no auth
  std::string served_model_name = "qwenserve";  // reported in responses and first in /v1/models
  std::vector<std::string> served_model_aliases;  // further names a request's "model" may use
  int32_t max_tokens_cap = 2048;         // requests asking for more get this many
  int32_t default_max_tokens = 512;      // when a request sets no max_tokens (fitted to context)
  size_t max_body_bytes = 8u << 20;      // larger bodies get 413
  int64_t keepalive_ms = 5000;           // SSE comment interval while nothing else is sent
  int http_threads = 32;                 // worker threads = connections served at once (see http_worker_pool.h)
  std::string log_format = "json";       // per-request log line on stderr: json, text or none
  double request_timeout_s = 0;          // > 0: default and upper bound of a request's "timeout"
  std::vector<std::string> allowed_origins;  // CORS (routes/cors.h): origins or "*"; empty: no CORS
  double request_head_timeout_s = 10;    // whole request head must arrive within (request_deadline.h); 0: off
  double request_body_timeout_s = 30;    // whole body must arrive within, after the head; 0: off
  double slo_ttft_ms = 0;                // > 0: --slo-ttft-ms, TTFT SLO for admission (server/slo_admission.h)
  double slo_itl_ms = 0;                 // > 0: --slo-itl-ms, mean inter-token latency SLO (goodput)
  double degrade_at_kv = 0;              // > 0: --degrade-at-kv, KV usage fraction that degrades service
  int64_t degrade_at_queue = 0;          // > 0: --degrade-at-queue, waiting requests that degrade service
  int32_t degraded_max_tokens = 128;     // --degraded-max-tokens: default max_tokens while degraded
  size_t response_cache_bytes = 0;       // > 0: --response-cache-size, response cache bound in bytes
};

/// A static file: body and content type (the web UI).
struct StaticFile {
  std::string_view content_type;
  std::string_view body;
};
using StaticFileLookup = std::function<const StaticFile*(std::string_view path)>;

class HttpServer {
 public:
  HttpServer(ServerOptions options, Engine& engine, const Tokenizer& tokenizer,
             const ChatTemplate& chat_template, metrics::ServerMetrics& metrics);
  ~HttpServer();

  /// Serves GET requests for paths the lookup knows (called before returning 404).
  void set_static_files(StaticFileLookup lookup) { static_files_ = std::move(lookup); }
  /// /ready answers 200 only after set_ready(true) (model loaded and warmed up).
  void set_ready(bool ready) { ready_.store(ready); }
  /// From now on /ready and generation routes answer 503 (SIGTERM drain), whatever set_ready()
  /// says; connections are still accepted until stop(), so newcomers get the 503 + Retry-After.
  void begin_draining() { draining_.store(true); }

  /// Binds host:port (SO_REUSEADDR, never SO_REUSEPORT: a second server on a busy port fails) and
  /// starts the options.http_threads worker threads. Throws qs::Error "cannot listen on HOST:PORT:
  /// <reason>" (listen_address.h: "invalid address", "address already in use", ...) or the worker
  /// pool's error when a thread cannot be created.
  void bind();
  /// Serves until stop() (binds first if bind() was not called, throwing as bind()). Returns false
  /// when accepting connections fails.
  bool listen();
  /// Stops accepting connections; listen() returns once in-flight requests are done. Safe from any
  /// thread at any time: a stop() before listen() makes listen() return at once.
  void stop();
  /// Port actually bound (useful with port 0).
  int bound_port() const { return bound_port_; }

 private:
  void register_routes();
  /// Answers `req` with `error` (send_error) and writes its rejection line, unless the request
  /// reached the engine (a generation with an x-request-id: logged by generation_job.cc) or is a
  /// /ready probe.
  void answer_error(const httplib::Request& req, httplib::Response& res, const ApiError& error) const;

  ServerOptions options_;
  Engine& engine_;
  const Tokenizer& tokenizer_;
  const ChatTemplate& chat_template_;
  metrics::ServerMetrics& metrics_;
  RejectionLogger rejection_logger_;
  std::unique_ptr<LazyGrammarCompiler> grammars_;        // structured outputs (built on first use)
  std::unique_ptr<GenerationRouteContext> generation_;  // what the two generation routes use
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<HttpWorkerPool> workers_;  // started by bind(), handed to httplib by listen()
  StaticFileLookup static_files_;
  RouteMethods route_methods_;  // each route's methods, for 405 + Allow (filled by register_routes)
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  bool accepting_requests() const { return ready_.load() && !draining_.load(); }
  int bound_port_ = 0;
  bool bound_ = false;
  // When the server was built (Unix seconds): the "created" of /v1/models.
  int64_t created_unix_s_ = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  std::atomic<bool> stop_requested_{false};
};

}  // namespace qs
