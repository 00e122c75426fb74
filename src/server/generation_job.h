// One OpenAI generation request after validation: the prompt's token ids, the engine requests
// for its n choices, and how to shape the response. Built by the route handlers, run by
// run_generation (non-streaming) or stream_generation (SSE).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "metrics/server_metrics.h"
#include "tokenizer/tokenizer.h"

namespace qs {

struct ChoiceState;

struct GenerationJob {
  enum class Api { kChat, kCompletion };
  Api api = Api::kChat;
  std::string id;                   // "chatcmpl-..." / "cmpl-..."
  std::string response_id;          // the id of the API's response when it is not `id` ("msg_...",
                                    // "resp_..." on translated routes), else ""; logged as the id
  std::string client_request_id;    // the client's X-Request-Id header (client_request_id()), or ""
  std::string model;                // served model name
  int64_t created = 0;              // unix seconds
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;          // for completions' echo
  bool echo = false;
  bool stream = false;
  bool include_usage = false;
  bool include_timings = false;     // stream_options.include_timings
  int32_t priority = 0;             // queue order (lower sooner)
  double slo_ttft_ms = 0;           // > 0: the TTFT SLO this request is admitted against
  std::string structured_param;     // the field that set the grammar (e.g. "response_format"), for errors
  double slo_itl_ms = 0;            // > 0: the server's mean-ITL SLO
  double predicted_ttft_ms = -1;    // at admission, from arrival; < 0: not predicted
  bool degraded = false;            // served under load-adaptive degradation
  std::string cache;                // response cache: "hit", "miss", "bypass" or "" (off / not cacheable)
  std::string cache_key;            // non-empty: the response cache key (response_cache.h)
  /// Called once when the response succeeded (status 200), before its log line: the choices as
  /// finished and the request's record (latency breakdown). Non-streaming: before the body is
  /// returned, so it may set headers.
  std::function<void(const std::vector<ChoiceState>&, const metrics::RequestRecord&)> on_success;
  bool logprobs = false;
  bool parse_tool_calls = false;    // request had tools: parse <tool_call> output
  bool split_reasoning = false;     // split <think>...</think> into reasoning_content
  bool report_stop_cause = false;   // add the engine's "stop_cause" next to each finish_reason
                                    // (for /v1/responses and /v1/messages, which translate it)
  std::vector<EngineRequest> choices;  // one engine request per choice (n)
  SteadyClock::time_point arrival;
  float temperature = 1;
  float top_p = 1;
  int32_t max_tokens = 0;
  enum class LogFormat { kJson, kText, kNone };
  LogFormat log_format = LogFormat::kJson;  // one line per finished request on stderr
};

/// Where a streaming response writes: returns false once the client is gone.
using ChunkWriter = std::function<bool(const std::string& bytes)>;

/// HTTP status for an engine error: kInvalid 400, kQueueFull / kQueueTimeout 429, kTimeout 408,
/// kShuttingDown and kAborted 503, anything else 500.
int http_status_for(EngineErrorCode code);

/// The API error of an engine failure `code` with `message`: its status (http_status_for), OpenAI
/// type and code (queue_full, queue_timeout, draining, request_timeout, server_shutdown,
/// context_length_exceeded; else server_error without a code). Streams send the same fields.
ApiError engine_api_error(EngineErrorCode code, const std::string& message, const std::string& grammar_param = {});

/// Submits every choice. When the engine turns one away (can never fit, queue full, shutting
/// down) the others are cancelled, a 429/503 is counted in admission_rejections_total, and
/// ApiError (400 / 429 / 503) is thrown, before any response byte is sent.
/// `slot` (optional) is a queue place reserved before the job was built; the first choice takes it.
std::vector<ChoiceState> submit_job(const GenerationJob& job, Engine& engine, metrics::ServerMetrics& metrics,
                                    QueueSlot* slot = nullptr);

/// Blocks until every choice has started running (or ended), keeping the events read for replay.
/// A choice that fails before starting (waited past --max-queue-wait, timed out) cancels the
/// rest, is recorded and logged, and throws ApiError with its status (429 / 408 / ...): used by
/// streaming responses so that a rejected request never gets a 200.
void await_admission(const GenerationJob& job, std::vector<ChoiceState>& choices, metrics::ServerMetrics& metrics);

/// Runs the submitted job to completion and returns the response body. Records latency and logs.
/// Throws ApiError (status from http_status_for) when a choice fails. `client_gone` (optional) is
/// asked after every engine event (at least every 100 ms): once true, every choice is cancelled
/// (the engine frees its KV blocks at its next step), the request is recorded and logged with
/// status 499, error "client disconnected" and finish_reason "cancelled" (as a disconnected
/// stream), and ApiError(499, code "client_disconnected") is thrown.
nlohmann::json run_generation(GenerationJob job, std::vector<ChoiceState> choices, const Tokenizer& tokenizer,
                              metrics::ServerMetrics& metrics, const std::function<bool()>& client_gone = {});

/// Streams the submitted job as server-sent events through `write` (role chunk, deltas, finish
/// chunk, optional usage chunk, [DONE]); a failure after the start is an SSE error event. Sends
/// ": keep-alive" comments while nothing else is written for `keepalive_ms`; cancels the
/// generation when `write` fails (client disconnected).
void stream_generation(GenerationJob job, std::vector<ChoiceState> choices, const Tokenizer& tokenizer,
                       metrics::ServerMetrics& metrics, const ChunkWriter& write, int64_t keepalive_ms);

}  // namespace qs
