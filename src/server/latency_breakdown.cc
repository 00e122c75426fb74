#include "server/latency_breakdown.h"

#include <cstdio>

namespace qs {
namespace {

std::string dur(const char* name, double ms) {
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "%s;dur=%.3f", name, ms < 0 ? 0.0 : ms);
  return buffer;
}

}  // namespace

std::string server_timing_header(const metrics::RequestRecord& r) {
  std::string out = dur("queue", r.queue_ms) + ", " + dur("prefill", r.prefill_ms) + ", " + dur("decode", r.decode_ms) +
                    ", " + dur("total", r.e2e_ms) + ", cached_tokens;desc=" + std::to_string(r.cached_tokens) +
                    ", preemptions;desc=" + std::to_string(r.preemptions);
  if (r.predicted_ttft_ms) out += ", " + dur("predicted_ttft", *r.predicted_ttft_ms);
  return out;
}

nlohmann::json timings_json(const metrics::RequestRecord& r) {
  return {{"queue_ms", r.queue_ms},
          {"prefill_ms", r.prefill_ms},
          {"decode_ms", r.decode_ms},
          {"total_ms", r.e2e_ms},
          {"cached_tokens", r.cached_tokens},
          {"preemptions", r.preemptions},
          {"predicted_ttft_ms", r.predicted_ttft_ms ? nlohmann::json(*r.predicted_ttft_ms) : nlohmann::json(nullptr)}};
}

}  // namespace qs
