#include "metrics/request_log.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/percentile.h"

namespace qs::metrics {

namespace {

template <typename T>
nlohmann::ordered_json or_null(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

}  // namespace

std::string request_log_line(const RequestRecord& record, std::chrono::system_clock::time_point finished_at) {
  const LatencySummary itl = summarize(record.itl_ms);
  nlohmann::ordered_json line = {
      {"ts", format_iso8601_utc(finished_at)},
      {"id", record.id},
      {"request_id", record.request_id.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(record.request_id)},
      {"status", record.status},
      {"finish_reason", record.finish_reason.empty() ? nlohmann::ordered_json(nullptr)
                                                     : nlohmann::ordered_json(record.finish_reason)},
      {"prompt_tokens", record.prompt_tokens},
      {"completion_tokens", record.completion_tokens},
      {"queue_ms", record.queue_ms},
      {"ttft_ms", or_null(record.ttft_ms)},
      {"itl_ms_mean", or_null(itl.mean)},
      {"itl_ms_p95", or_null(itl.p95)},
      {"e2e_ms", record.e2e_ms},
      {"temperature", record.temperature},
      {"top_p", record.top_p},
      {"max_tokens", or_null(record.max_tokens)},
      {"stop_cause", record.stop_cause.empty() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(record.stop_cause)},
      {"cached_tokens", record.cached_tokens},
      {"prefill_computed_tokens", record.prefill_computed_tokens},
      {"preemptions", record.preemptions},
      {"spec_draft_tokens", record.spec_draft_tokens},
      {"spec_accepted_tokens", record.spec_accepted_tokens},
      {"spec_acceptance_rate", record.spec_draft_tokens > 0
                                   ? nlohmann::ordered_json(static_cast<double>(record.spec_accepted_tokens) /
                                                            static_cast<double>(record.spec_draft_tokens))
                                   : nlohmann::ordered_json(nullptr)},
      {"prefill_ms", record.prefill_ms},
      {"decode_ms", record.decode_ms},
      {"predicted_ttft_ms", or_null(record.predicted_ttft_ms)},
      {"degraded", record.degraded},
  };
  if (!record.cache.empty()) line["cache"] = record.cache;
  if (record.error) line["error"] = *record.error;
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string request_log_line(const RequestRecord& record) {
  return request_log_line(record, std::chrono::system_clock::now());
}

}  // namespace qs::metrics
