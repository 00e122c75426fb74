// The per-request latency breakdown (issue 12) in the two shapes a client sees: a W3C
// Server-Timing header (non-streaming responses) and a "timings" object (the final SSE chunk with
// stream_options.include_timings). Both come from the request's metrics::RequestRecord, the same
// record its log line is written from, so the three agree.
//
// Parts, milliseconds: queue (arrival -> admitted into the running batch), prefill (admitted ->
// first token), decode (first -> last token), total (arrival -> response complete),
// predicted_ttft (the admission prediction, from arrival; absent when none was made); counts:
// cached_tokens (prompt tokens from the prefix cache), preemptions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "metrics/request_record.h"

namespace qs {

/// "queue;dur=1.2, prefill;dur=3.4, decode;dur=5.6, total;dur=10.2, cached_tokens;desc=0,
/// preemptions;desc=0[, predicted_ttft;dur=4.0]": Server-Timing grammar (W3C Server Timing,
/// section 3: metric names and params are RFC 7230 tokens; dur a decimal of milliseconds).
std::string server_timing_header(const metrics::RequestRecord& record);

/// {"queue_ms", "prefill_ms", "decode_ms", "total_ms", "cached_tokens", "preemptions",
/// "predicted_ttft_ms" (null when none)}.
nlohmann::json timings_json(const metrics::RequestRecord& record);

}  // namespace qs
