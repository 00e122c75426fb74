#include "server/routes/metrics_routes.h"

#include "server/routes/http_reply.h"

namespace qs {
namespace {

void update_gauges(const EngineStats& stats, metrics::ServerMetrics& metrics) {
  metrics.set_num_requests_running(stats.running);
  metrics.set_num_requests_waiting(stats.waiting);
  metrics.set_kv_cache_usage(stats.kv_cache_usage);
  metrics.set_spec_propose(stats.spec_propose_seconds_total, stats.spec_propose_steps_total);
}

}  // namespace

void handle_metrics(const EngineStats& stats, metrics::ServerMetrics& metrics, httplib::Response& res) {
  update_gauges(stats, metrics);
  res.set_content(metrics.prometheus_text(), "text/plain; version=0.0.4; charset=utf-8");
}

void handle_stats(const EngineStats& stats, metrics::ServerMetrics& metrics, httplib::Response& res) {
  update_gauges(stats, metrics);
  nlohmann::json body = metrics.stats_json();
  body["kv_blocks"] = {{"total", stats.kv_blocks_total},
                       {"referenced", stats.kv_blocks_referenced},
                       {"cached", stats.kv_blocks_cached}};
  body["preemptions"] = stats.preemptions_total;
  // propose_*: the draft source's time on the engine thread (n-gram lookup, or the draft model's
  // forward steps) per step that asked for drafts.
  const double propose_steps = static_cast<double>(stats.spec_propose_steps_total);
  body["speculative"] = {{"draft_tokens", stats.spec_draft_tokens_total},
                         {"accepted_tokens", stats.spec_accepted_tokens_total},
                         {"propose_steps", stats.spec_propose_steps_total},
                         {"propose_seconds", stats.spec_propose_seconds_total},
                         {"propose_ms_per_step", propose_steps > 0 ? 1e3 * stats.spec_propose_seconds_total / propose_steps : 0.0}};
  // Engine-thread time since start: the backend's steps and the host work on their output
  // (detokenizing, stop strings, guards, events), to see whether output processing is a share of
  // the step worth moving off the engine thread.
  // mask_wait_*: how long the engine thread waited for structured-output masks after the
  // backend's launch (EngineStats), per step that computed masks.
  const double mask_steps = static_cast<double>(stats.mask_steps_total);
  body["engine_steps"] = {{"steps", stats.steps_total},
                          {"forward_seconds", stats.forward_seconds_total},
                          {"output_seconds", stats.output_seconds_total},
                          {"mask_steps", stats.mask_steps_total},
                          {"mask_wait_seconds", stats.mask_wait_seconds_total},
                          {"mask_wait_ms_per_step", mask_steps > 0 ? 1e3 * stats.mask_wait_seconds_total / mask_steps : 0.0},
                          {"mask_wait_max_ms", 1e3 * stats.mask_wait_max_seconds}};
  send_json(res, 200, body);
}

}  // namespace qs
