// One JSON object per finished request, on a single line, for the access log.
//
// Fields: ts (finish time, ISO 8601 UTC with milliseconds, e.g. "2025-01-31T23:59:58.123Z"), id,
// status, finish_reason (null when empty), prompt_tokens, completion_tokens, queue_ms, ttft_ms
// (null when no token), itl_ms_mean and itl_ms_p95 (over this request's inter-token gaps, null
// when there are none; P95 is numpy's linear interpolation, see metrics/percentile.h), e2e_ms,
// temperature, top_p, max_tokens (null when unset), and error only when the request failed.
// Strings that are not valid UTF-8 are written with U+FFFD in place of the bad bytes.
#pragma once

#include <chrono>
#include <string>

#include "core/log.h"
#include "metrics/request_record.h"

namespace qs::metrics {

/// "YYYY-MM-DDTHH:MM:SS.mmmZ" for `time` (truncated to milliseconds): core/log.h's.
using qs::format_iso8601_utc;

/// The log line for `record` stamped with `finished_at`; no trailing newline.
std::string request_log_line(const RequestRecord& record, std::chrono::system_clock::time_point finished_at);

/// The log line for `record` stamped with the current system time.
std::string request_log_line(const RequestRecord& record);

}  // namespace qs::metrics
