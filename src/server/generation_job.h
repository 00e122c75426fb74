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
#include "metrics/server_metrics.h"
#include "tokenizer/tokenizer.h"

namespace qs {

struct GenerationJob {
  enum class Api { kChat, kCompletion };
  Api api = Api::kChat;
  std::string id;                   // "chatcmpl-..." / "cmpl-..."
  std::string model;                // served model name
  int64_t created = 0;              // unix seconds
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;          // for completions' echo
  bool echo = false;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  bool parse_tool_calls = false;    // request had tools: parse <tool_call> output
  bool split_reasoning = false;     // split <think>...</think> into reasoning_content
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

/// Runs the job to completion and returns the response body. Records latency and logs.
/// Throws ApiError when the engine rejects the request.
nlohmann::json run_generation(GenerationJob job, Engine& engine, const Tokenizer& tokenizer,
                              metrics::ServerMetrics& metrics);

/// Streams the job as server-sent events through `write` (role chunk, deltas, finish chunk,
/// optional usage chunk, [DONE]); sends ": keep-alive" comments while nothing else is written for
/// `keepalive_ms`; cancels the generation when `write` fails (client disconnected).
void stream_generation(GenerationJob job, Engine& engine, const Tokenizer& tokenizer,
                       metrics::ServerMetrics& metrics, const ChunkWriter& write,
                       int64_t keepalive_ms);

}  // namespace qs
