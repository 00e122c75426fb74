// GET /metrics (Prometheus text exposition) and GET /stats (rolling latency percentiles as JSON).
#pragma once

#include <httplib.h>

#include "engine/engine.h"
#include "metrics/server_metrics.h"

namespace qs {

/// GET /metrics: sets the running / waiting / KV-usage gauges from `stats`, then answers 200 with
/// metrics.prometheus_text() as "text/plain; version=0.0.4; charset=utf-8".
void handle_metrics(const EngineStats& stats, metrics::ServerMetrics& metrics, httplib::Response& res);

/// GET /stats: sets the same gauges, then answers 200 with metrics.stats_json() plus
/// "kv_blocks" {"total", "referenced", "cached"}, "preemptions" and "engine_steps" {"steps",
/// "forward_seconds", "output_seconds", "mask_steps", "mask_wait_seconds", "mask_wait_ms_per_step",
/// "mask_wait_max_ms"} (engine-thread time since start; EngineStats) from `stats`.
void handle_stats(const EngineStats& stats, metrics::ServerMetrics& metrics, httplib::Response& res);

}  // namespace qs
