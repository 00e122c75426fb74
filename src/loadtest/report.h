// Aggregates the raw per-request records of one benchmark level into the reported metrics.
//
// Over the requests that completed (HTTP 200 and a full stream ending in [DONE]):
//   request_throughput = completed / duration_s                        (req/s)
//   output_throughput  = sum(output tokens) / duration_s              (tokens/s)
//   ttft_ms, e2e_ms    = per-request values                             (ms)
//   tpot_ms            = (e2e_ms - ttft_ms) / (output_tokens - 1), requests with >= 2 tokens (ms)
//   itl_ms             = every gap between successive content chunks of every request, pooled (ms)
//   goodput            = requests meeting every given SLO / duration_s (req/s); a request meets
//                        --slo-ttft-ms when ttft_ms <= SLO and --slo-itl-ms when each of its ITL
//                        gaps is <= SLO (its longest stall). With no SLO, goodput = throughput.
// These follow vLLM benchmarks/benchmark_serving.py (TTFT, TPOT, ITL, E2EL, goodput); the ITL SLO
// is judged on the worst gap rather than vLLM's per-request TPOT, so one stall fails a request.
// Each latency metric is {mean, p50, p90, p95, p99, max} as defined in statistics.h.
// duration_s runs from the start of the level to the end of its last request.
// errors counts the other requests by status: the HTTP status ("429"), a transport failure
// ("connect", "read", "connect_timeout"), "stream_error" (an error event or bad data in the stream),
// "incomplete" (no [DONE]) or "skipped" (a later turn not sent because an earlier turn failed).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "loadtest/sse_client.h"

namespace qs::loadtest {

struct LevelResult {
  bool closed_loop = true;  // true: "concurrency" = level; false: "request_rate" = level (req/s)
  double level = 0;
  double burstiness = 1;
  double duration_s = 0;
  int turns_per_user = 1;
  std::vector<RequestRecord> records;
};

struct SloOptions {
  std::optional<double> ttft_ms;
  std::optional<double> itl_ms;
};

// The SLOs a qwenserve server exports in its /metrics text (qwenserve_slo_ttft_seconds,
// qwenserve_slo_itl_seconds, in ms; a gauge that is 0 or absent gives nullopt). loadtest uses them
// when neither --slo-ttft-ms nor --slo-itl-ms is given, so goodput is measured against the
// server's own promise.
SloOptions slo_from_metrics(const std::string& metrics_text);

// True when the request completed and meets the SLOs (see above).
bool meets_slo(const RequestRecord& r, const SloOptions& slo);

// The level's metrics as one JSON object (keys in the order listed in the header comment).
nlohmann::ordered_json level_json(const LevelResult& level, const SloOptions& slo);

// One line of --dump-requests: the level, the request's identity and raw measurements.
nlohmann::ordered_json record_json(const RequestRecord& r, const LevelResult& level);

// Human-readable table of a level_json() object.
std::string format_level(const nlohmann::ordered_json& level);

}  // namespace qs::loadtest
