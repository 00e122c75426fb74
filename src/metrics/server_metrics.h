// The qwenserve metric set: Prometheus families for /metrics plus the rolling windows for /stats.
//
// Independent of HTTP: the server calls record_request() once per finished request, the gauge
// setters from the scheduler, and serves prometheus_text() / stats_json().
//
// Families (Prometheus text format 0.0.4, base unit seconds):
//   histograms qwenserve_time_to_first_token_seconds, qwenserve_inter_token_latency_seconds,
//              qwenserve_e2e_request_latency_seconds, qwenserve_request_queue_time_seconds
//   counters   qwenserve_prompt_tokens_total, qwenserve_generation_tokens_total,
//              qwenserve_request_success_total{finished_reason}, qwenserve_http_requests_total{status},
//              qwenserve_admission_rejections_total, qwenserve_prefix_cache_queries_total and
//              qwenserve_prefix_cache_hits_total (prompt tokens looked up / served from the prefix
//              cache, as vLLM's), qwenserve_prefill_computed_tokens_total (prompt tokens actually
//              computed), qwenserve_num_preemptions_total, qwenserve_spec_draft_tokens_total and
//              qwenserve_spec_accepted_tokens_total (speculative decoding: draft tokens verified /
//              accepted, as vLLM's spec_decode_num_draft_tokens / num_accepted_tokens),
//              qwenserve_spec_propose_seconds_total and qwenserve_spec_propose_steps_total (time the
//              draft source took on the engine thread, and the steps that asked it for drafts:
//              rate(seconds) / rate(steps) is the mean proposal time per step; set at scrape time)
//   gauges     qwenserve_num_requests_running, qwenserve_num_requests_waiting,
//              qwenserve_kv_cache_usage_perc (fraction 0..1 of KV blocks in use),
//              qwenserve_cache_config_info{block_size,num_gpu_blocks} 1 (KV geometry, when known)
//   latency promises (issue 12): qwenserve_slo_requests_total{slo="ttft|itl",result="met|missed"}
//              (successful requests against the configured SLOs: TTFT <= SLO; mean ITL <= SLO;
//              a 429 from SLO admission counts as a TTFT miss),
//              qwenserve_slo_ttft_seconds / qwenserve_slo_itl_seconds (gauges: the configured SLOs,
//              0 when off), qwenserve_ttft_prediction_error_seconds (histogram of measured minus
//              predicted TTFT, buckets +-latency_buckets_seconds() and 0),
//              qwenserve_response_cache_requests_total{result="hit|miss|bypass"},
//              qwenserve_response_cache_bytes, qwenserve_degraded (gauge 0/1),
//              qwenserve_degraded_requests_total
// With ExportOptions::vllm_compat the families vLLM has are also written under vLLM's names
// (vllm:num_requests_waiting, ...; see kVllmAliases in server_metrics.cc) with model_name="<served
// model name>" on every sample except vllm:cache_config_info (whose labels are vLLM's too). These
// names are what the llm-d Endpoint Picker's default "vllm" engine, vLLM Grafana dashboards and
// autoscalers read.
#pragma once

#include <atomic>
#include <string_view>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/prometheus.h"
#include "metrics/recent_requests.h"
#include "metrics/request_record.h"
#include "metrics/rolling_window.h"

namespace qs::metrics {

/// Upper bounds (seconds) shared by the four latency histograms: the Renard R20 preferred numbers
/// (ISO 3: 1.00 1.12 1.25 1.40 1.60 1.80 2.00 2.24 2.50 2.80 3.15 3.55 4.00 4.50 5.00 5.60 6.30
/// 7.10 8.00 9.00 per decade, consecutive ratio ~10^(1/20) = 1.122) from 0.001 s to 56 s, then
/// 60 s: 97 buckets. histogram_quantile() interpolates linearly inside a bucket, so a P95 read
/// anywhere between 1 ms and 60 s is off by at most one bucket width, ~12% of the value; the
/// decimal bounds also read cleanly in dashboards ("0.0224", "1.25").
std::vector<double> latency_buckets_seconds();

/// Which families /metrics writes beyond the qwenserve_* set.
struct ExportOptions {
  /// Also write vLLM's names for the families vLLM has (the `--metrics-compat vllm` flag).
  bool vllm_compat = false;
  /// Value of the model_name label of the vLLM names (the served model name).
  std::string model_name = "qwenserve";
  /// KV cache geometry for qwenserve_cache_config_info: tokens per block and blocks in the whole
  /// cache (the label names block_size / num_gpu_blocks are the llm-d model-server protocol's,
  /// whatever the device). Nothing is written while kv_blocks is 0 (unknown).
  std::int64_t kv_block_size = 0;
  std::int64_t kv_blocks = 0;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(SteadyClockFn clock = steady_clock_now, RollingWindowOptions window_options = {},
                         const ExportOptions& export_options = {});

  /// Also: response_cache_requests_total{result} when record.cache is set, degraded_requests_total
  /// when record.degraded; for a success, slo_requests_total against the record's SLOs and the
  /// TTFT prediction error when both are known.
  /// Counts the response in http_requests_total{status} and its tokens in prompt/generation
  /// tokens_total, prefix-cache queries (prompt_tokens) and hits (cached_tokens), computed
  /// prefill tokens, preemptions and draft / accepted tokens (work done even if the request then failed). When record.succeeded(), also
  /// request_success_total{finished_reason} ("unknown" when empty), the four latency histograms
  /// (ms converted to seconds; every ITL gap is one observation) and the rolling windows.
  void record_request(const RequestRecord& record);

  /// Counts a response that is not a generation (e.g. /health, /metrics, 404) by status code.
  void record_http_status(int status);

  /// Counts a request turned away by admission control (queue full / over capacity). Call it in
  /// addition to recording the rejection's HTTP response.
  void record_admission_rejection();
  /// Counts a request turned away by SLO-aware admission (429 slo_ttft_unattainable) as
  /// slo_requests_total{slo="ttft",result="missed"}: its TTFT promise was not kept for that
  /// client, so goodput (met / (met + missed)) and the burn-rate alerts see shed load. Call it in
  /// addition to record_admission_rejection().
  void record_slo_rejection();

  /// Counts a request with structured output in structured_output_requests_total{type} (type:
  /// json_schema, json_object, regex, choice, grammar or tool).
  void record_structured_output(std::string_view type);
  /// One grammar compile (a cache hit included) in grammar_compile_seconds.
  void record_grammar_compile(double seconds);

  void set_num_requests_running(std::int64_t n);
  void set_num_requests_waiting(std::int64_t n);
  /// `fraction` of KV cache blocks in use, clamped to [0, 1].
  void set_kv_cache_usage(double fraction);
  /// Speculative decoding's draft source on the engine thread, totals since start (EngineStats
  /// spec_propose_seconds_total / spec_propose_steps_total): seconds spent proposing drafts
  /// (n-gram lookup or the draft model's forward steps) and the steps that asked for drafts.
  void set_spec_propose(double seconds_total, std::int64_t steps_total);
  /// The configured SLOs in seconds (0: off).
  void set_slo(double ttft_s, double itl_s);
  void set_response_cache_bytes(std::int64_t bytes);
  void set_degraded(bool degraded);

  /// Body for GET /metrics; serve it with kPrometheusContentType.
  std::string prometheus_text() const;

  /// Body for GET /stats: RollingWindow::stats_json() plus "running", "waiting", "kv_cache_usage",
  /// and (issue 12) "slo" {ttft_s, itl_s, ttft_met, ttft_missed, itl_met, itl_missed} (counts since
  /// start), "prediction_error_ms" (RecentRequests), "slowest" (the 20 slowest of the last 256
  /// successful requests with their breakdown), "response_cache" {hit, miss, bypass, bytes},
  /// "degraded" {now, requests, share (of the generation requests recorded)}.
  nlohmann::json stats_json() const;

  const RollingWindow& window() const { return window_; }

 private:
  MetricsRegistry registry_;
  Histogram& ttft_seconds_;
  Histogram& itl_seconds_;
  Histogram& e2e_seconds_;
  Histogram& queue_seconds_;
  Counter& prompt_tokens_;
  Counter& generation_tokens_;
  LabeledCounter& request_success_;
  LabeledCounter& http_requests_;
  Counter& admission_rejections_;
  Gauge& running_;
  Gauge& waiting_;
  Gauge& kv_cache_usage_;
  Counter& prefix_cache_queries_;
  Counter& prefix_cache_hits_;
  Counter& prefill_computed_tokens_;
  Counter& preemptions_;
  Counter& spec_draft_tokens_;
  Counter& spec_accepted_tokens_;
  TotalCounter& spec_propose_seconds_;
  TotalCounter& spec_propose_steps_;
  LabeledCounter& slo_requests_;
  Gauge& slo_ttft_seconds_;
  Gauge& slo_itl_seconds_;
  Histogram& ttft_prediction_error_;
  LabeledCounter& response_cache_requests_;
  Gauge& response_cache_bytes_;
  Gauge& degraded_;
  Counter& degraded_requests_;
  LabeledCounter& structured_output_requests_;
  Histogram& grammar_compile_seconds_;
  RollingWindow window_;
  RecentRequests recent_;
  std::atomic<std::uint64_t> generation_requests_{0};  // record_request calls (for the degraded share)
};

}  // namespace qs::metrics
