// One streaming request to an OpenAI-compatible server, timed on the client with a monotonic clock.
//
// Definitions (vLLM benchmarks/benchmark_serving.py):
//   TTFT  = time from sending the request to receiving the first chunk with non-empty content, ms;
//   ITL   = gaps between successive non-empty content chunks, ms (one entry per gap);
//   E2E   = time from sending the request to the end of the stream, ms;
//   output tokens = usage.completion_tokens of the final usage chunk when the server sends one
//                   (stream_options.include_usage), else the number of content chunks.
// "Content" is choices[0].delta.content (or delta.reasoning_content) for chat and choices[0].text
// for completions. Only delta.content goes into RequestRecord::text (the multi-turn history).
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace httplib {
class Client;
}

namespace qs::loadtest {

using Clock = std::chrono::steady_clock;

// Where and how to send requests. `url` is "http://host:port" with an optional path prefix
// ("http://host:8000/v1" and "http://host:8000" both work).
struct EndpointConfig {
  std::string url;
  std::string api_key;   // sent as "Authorization: Bearer <key>" when non-empty
  std::string model;     // "model" field of every request (omitted when empty)
  bool chat = true;      // /v1/chat/completions; false: /v1/completions
  double timeout_s = 600;  // read timeout per request
};

// Raw measurements of one request (all times from the same steady clock).
struct RequestRecord {
  size_t conversation = 0;  // index of the simulated user / conversation
  int turn = 1;             // 1-based turn within the conversation
  int max_tokens = 0;       // requested output length
  double start_s = 0;       // send time, seconds since the start of the run
  double ttft_ms = 0;       // NaN when no content chunk arrived
  std::vector<double> itl_ms;
  double e2e_ms = 0;
  int output_tokens = 0;
  int prompt_tokens = -1;   // usage.prompt_tokens, -1 when not reported
  int content_chunks = 0;
  std::string status;       // "200" when fine, else the HTTP status or a transport error name
  std::string error;        // empty when fine
  std::string finish_reason;
  std::string text;         // generated text (used for multi-turn history; not dumped)
  // The server's latency breakdown ("timings" of the last chunk, qwenserve with
  // stream_options.include_timings), ms; NaN when the server sent none.
  double server_queue_ms = std::nan("");
  double server_prefill_ms = std::nan("");
  double server_decode_ms = std::nan("");
  double server_predicted_ttft_ms = std::nan("");

  bool ok() const { return error.empty() && status == "200"; }
};

// A connection to the server, reused (keep-alive) by one simulated user. Not thread-safe.
class StreamClient {
 public:
  explicit StreamClient(const EndpointConfig& config);
  ~StreamClient();
  StreamClient(const StreamClient&) = delete;
  StreamClient& operator=(const StreamClient&) = delete;

  // Sends `body` (stream: true is added) to the generation endpoint and reads the SSE stream.
  // `messages` is used for chat, `prompt` for completions. Never throws for server or network
  // errors: they are returned in RequestRecord::status / error.
  RequestRecord generate(const nlohmann::json& messages, const std::string& prompt, int max_tokens,
                         Clock::time_point run_start);

  // Token count of `text` from the server's POST /tokenize ({"prompt": text} -> {"count": n} or
  // {"tokens": [...]}); nullopt when the route is missing or fails (then never asked again).
  std::optional<int> count_tokens(const std::string& text);

  // Body of GET /metrics on the server root; empty when it fails or is not 200.
  std::string metrics_text();

  // Generation path, e.g. "/v1/chat/completions".
  const std::string& path() const { return path_; }

 private:
  nlohmann::json request_body(const nlohmann::json& messages, const std::string& prompt,
                              int max_tokens) const;

  EndpointConfig config_;
  std::string path_;
  std::string tokenize_path_;
  std::string metrics_path_;
  std::unique_ptr<httplib::Client> client_;
  bool tokenize_unavailable_ = false;
};

// Applies one parsed SSE data payload (a JSON chunk) to a record; returns false on an error
// payload ({"error": ...}). `now` is the arrival time of the chunk. Exposed for unit tests.
bool apply_chunk(const nlohmann::json& chunk, bool chat, Clock::time_point sent,
                 Clock::time_point now, std::optional<Clock::time_point>& last_content,
                 RequestRecord& record);

}  // namespace qs::loadtest
