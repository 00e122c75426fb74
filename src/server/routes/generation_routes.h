// POST /v1/chat/completions and POST /v1/completions: admission, parsing, job building, then a
// JSON body or an SSE stream.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/engine.h"
#include "metrics/server_metrics.h"
#include "server/http_server.h"
#include "server/job_builder.h"
#include "server/response_cache.h"

namespace qs {

/// What the generation routes use; references outlive the server.
struct GenerationRouteContext {
  const ServerOptions& options;
  Engine& engine;
  metrics::ServerMetrics& metrics;
  JobContext job_context;
  std::function<bool()> accepting_requests;  // ready and not draining
  std::shared_ptr<ResponseCache> response_cache;  // null: --response-cache-size off
};

/// Issue 12 additions, in order: the response cache (a hit is answered here, "x-qwenserve-cache:
/// hit", without the engine; "cache": false bypasses), load-adaptive degradation (degradation.h,
/// "x-qwenserve-degraded: 1"), SLO-aware admission (slo_admission.h: 429 with Retry-After), and a
/// Server-Timing header on non-streaming responses (latency_breakdown.h).
/// POST /v1/chat/completions. Before any parsing, a place in the engine's queue is reserved:
/// 503 server_shutdown when not accepting (draining), 429 queue_full when --max-queue requests wait (both counted
/// in admission rejections, both with Retry-After). Then parse_chat_request / build_chat_job
/// (400 / 404 / 415 as documented there), submission (400 / 429 / 503) and, for "stream": true,
/// an SSE body (text/event-stream, Cache-Control: no-cache); else a chat.completion body. Sets
/// "x-request-id" once the job reached the engine (its log line is then written by the engine
/// side, generation_job.h). Errors are thrown as ApiError.
void handle_chat_completions(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res);

/// Reshapes a chat completion into another API (/v1/responses, /v1/messages). One per request.
class ResponseAdapter {
 public:
  virtual ~ResponseAdapter() = default;
  /// The id the API's response carries for the chat completion `chat_id` ("msg_...", "resp_..."):
  /// the response's default x-request-id and its log line's id.
  virtual std::string response_id(const std::string& chat_id) const = 0;
  /// Called once the job is built, before any other call (its id, model, created, prompt_ids).
  virtual void on_job(const GenerationJob& job) = 0;
  /// The API's response body for a chat.completion body (with choices[].stop_cause).
  virtual nlohmann::json body(const nlohmann::json& chat_completion) = 0;
  /// The API's SSE bytes for the SSE bytes of a chat.completion.chunk stream (whole events:
  /// "data: {...}\n\n", ": keep-alive\n\n", "data: [DONE]\n\n"); may be empty.
  virtual std::string stream(const std::string& chat_sse) = 0;
};

/// Reserves the queue place as handle_chat_completions does first (503 / 429 as documented there).
QueueSlot reserve_generation_slot(const GenerationRouteContext& ctx);

/// Runs an already parsed chat request (n must be 1) through the chat pipeline and answers in the
/// shape `adapter` makes: a JSON body, or an SSE stream when request.fields.stream. The chat
/// stream always includes its usage chunk and each finish_reason its stop_cause. `req` (the HTTP
/// request it came in) gives the X-Request-Id and the socket whose hang-up cancels a non-streaming
/// generation. Errors before the first byte are thrown as ApiError.
void run_adapted_chat(const GenerationRouteContext& ctx, const httplib::Request& req, const ChatRequest& request,
                      QueueSlot slot, std::shared_ptr<ResponseAdapter> adapter, httplib::Response& res);

/// Longest X-Request-Id kept (bytes); a longer one is ignored.
inline constexpr size_t kMaxClientRequestIdBytes = 128;

/// The client's X-Request-Id header (vLLM's name): kept when it is 1..kMaxClientRequestIdBytes
/// visible ASCII characters (0x21-0x7e), else "" (ignored, never an error). A generation echoes
/// it as its response's x-request-id header (instead of the response id) and logs it as the log
/// line's `request_id`, so a client or gateway can find its request in the server's log.
std::string client_request_id(const httplib::Request& req);

/// POST /v1/completions: as handle_chat_completions with parse_completion_request /
/// build_completion_job and text_completion bodies.
void handle_completions(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace qs
