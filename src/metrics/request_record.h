// What the server knows about one finished request: the input to ServerMetrics::record_request and
// request_log_line. Plain data; every duration is in milliseconds measured on a steady clock.
//
// Timeline (all relative to the moment the HTTP request was received, "arrival"):
//   queue_ms  arrival -> admitted into the running batch (time spent waiting for capacity)
//   ttft_ms   arrival -> first generated token emitted (includes queue_ms and the prefill)
//   itl_ms    gap between each pair of consecutive generated tokens (completion_tokens - 1 gaps
//             when every token is timed)
//   e2e_ms    arrival -> last byte of the response
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qs::metrics {

struct RequestRecord {
  std::string id;                          ///< response id, e.g. "chatcmpl-..."
  std::string request_id;                  ///< the client's X-Request-Id; empty when it sent none
  int status = 200;                        ///< HTTP status code sent to the client
  std::string finish_reason;               ///< "stop", "length", ...; empty when none
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  double queue_ms = 0.0;
  std::optional<double> ttft_ms;           ///< nullopt when no token was generated
  std::vector<double> itl_ms;
  double e2e_ms = 0.0;
  double temperature = 1.0;                ///< sampling parameters as applied
  double top_p = 1.0;
  std::optional<std::int64_t> max_tokens;  ///< nullopt when the client sent none
  std::optional<std::string> error;        ///< message when the request failed (even mid-stream)
  std::string stop_cause;                  ///< engine's reason for the end: "max_tokens",
                                           ///< "stop_token", "degenerate_repetition", ...; empty: none
  std::int64_t cached_tokens = 0;          ///< prompt tokens served from the prefix cache
  std::int64_t prefill_computed_tokens = 0;  ///< prompt tokens actually computed (all choices)
  std::int64_t preemptions = 0;            ///< times a choice was preempted and recomputed
  std::int64_t spec_draft_tokens = 0;      ///< speculative decoding: draft tokens verified (all choices)
  std::int64_t spec_accepted_tokens = 0;   ///< of those, accepted
  // Latency breakdown (issue 12): prefill_ms = admitted -> first token (ttft_ms - queue_ms),
  // decode_ms = first -> last token.
  double prefill_ms = 0.0;
  double decode_ms = 0.0;
  std::optional<double> predicted_ttft_ms;  ///< admission's TTFT prediction from arrival; nullopt: none
  double slo_ttft_ms = 0.0;                ///< > 0: the TTFT SLO the request was admitted against
  double slo_itl_ms = 0.0;                 ///< > 0: the mean-ITL SLO
  bool degraded = false;                   ///< served under load-adaptive degradation
  std::string cache;                       ///< response cache: "hit", "miss", "bypass"; empty: off / not cacheable

  /// 2xx status and no error: the request counts as a success and its latencies are recorded.
  bool succeeded() const { return status >= 200 && status < 300 && !error.has_value(); }
};

}  // namespace qs::metrics
