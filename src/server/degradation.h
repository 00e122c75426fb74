// Load-adaptive degradation (issue 12): above --degrade-at-kv (fraction of KV blocks in use)
// or --degrade-at-queue (requests waiting), requests without an explicit max_tokens get
// --degraded-max-tokens as their default and the chat template's thinking switch
// ("enable_thinking", where the template has one and the request did not set it) is turned off;
// responses say so with "x-qwenserve-degraded: 1", the log line's "degraded" field and
// qwenserve_degraded_requests_total. Below both thresholds service is normal again.
#pragma once

#include <cstdint>

#include "engine/engine.h"
#include "server/http_server.h"

namespace qs {

/// True when degradation is enabled (a threshold > 0) and `stats` reaches a threshold:
/// kv_cache_usage >= degrade_at_kv or waiting >= degrade_at_queue.
bool degraded_now(const ServerOptions& options, const EngineStats& stats);

/// True when the chat template source reads an `enable_thinking` variable (Qwen3's switch).
bool template_has_thinking_switch(const std::string& template_source);

}  // namespace qs
