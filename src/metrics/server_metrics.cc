#include "metrics/server_metrics.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace qs::metrics {

namespace {

/// R20 mantissas scaled by 100 (ISO 3 preferred numbers).
constexpr std::array<int, 20> kR20Hundredths = {100, 112, 125, 140, 160, 180, 200, 224, 250, 280,
                                                315, 355, 400, 450, 500, 560, 630, 710, 800, 900};
constexpr double kMaxBucketSeconds = 60.0;

/// mantissa * 10^exponent, correctly rounded from decimal (so 0.00112 prints back as "0.00112").
double decimal(int mantissa, int exponent) {
  const std::string text = std::to_string(mantissa) + "e" + std::to_string(exponent);
  double value = 0.0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

double ms_to_seconds(double ms) { return ms / 1000.0; }

/// vLLM's name for each qwenserve family it also has (same type and semantics; vLLM's docs,
/// "Production Metrics"). Counters carry the _total suffix in the exposition, as vLLM's do.
struct VllmAlias {
  const char* vllm_name;
  const char* qwenserve_name;
};
constexpr std::array<VllmAlias, 12> kVllmAliases = {{
    {"vllm:num_requests_running", "qwenserve_num_requests_running"},
    {"vllm:num_requests_waiting", "qwenserve_num_requests_waiting"},
    {"vllm:kv_cache_usage_perc", "qwenserve_kv_cache_usage_perc"},
    {"vllm:time_to_first_token_seconds", "qwenserve_time_to_first_token_seconds"},
    {"vllm:inter_token_latency_seconds", "qwenserve_inter_token_latency_seconds"},
    {"vllm:e2e_request_latency_seconds", "qwenserve_e2e_request_latency_seconds"},
    {"vllm:request_queue_time_seconds", "qwenserve_request_queue_time_seconds"},
    {"vllm:prompt_tokens_total", "qwenserve_prompt_tokens_total"},
    {"vllm:generation_tokens_total", "qwenserve_generation_tokens_total"},
    {"vllm:request_success_total", "qwenserve_request_success_total"},
    {"vllm:spec_decode_num_draft_tokens_total", "qwenserve_spec_draft_tokens_total"},
    {"vllm:spec_decode_num_accepted_tokens_total", "qwenserve_spec_accepted_tokens_total"},
}};

constexpr const char* kCacheConfigInfo = "qwenserve_cache_config_info";
constexpr const char* kCacheConfigHelp =
    "KV cache geometry (value 1): block_size = tokens per block, num_gpu_blocks = blocks in the cache.";

/// -60 s .. 60 s: the latency buckets mirrored around 0.
std::vector<double> signed_latency_buckets_seconds();

}  // namespace

std::vector<double> latency_buckets_seconds() {
  std::vector<double> bounds;
  for (int decade = -3; decade <= 1; ++decade) {  // 1 ms, 10 ms, 100 ms, 1 s, 10 s decades
    for (int hundredths : kR20Hundredths) {
      const double bound = decimal(hundredths, decade - 2);
      if (bound < kMaxBucketSeconds) bounds.push_back(bound);
    }
  }
  bounds.push_back(kMaxBucketSeconds);
  return bounds;
}

namespace {
std::vector<double> signed_latency_buckets_seconds() {
  const std::vector<double> positive = latency_buckets_seconds();
  std::vector<double> bounds;
  for (auto it = positive.rbegin(); it != positive.rend(); ++it) bounds.push_back(-*it);
  bounds.push_back(0.0);
  bounds.insert(bounds.end(), positive.begin(), positive.end());
  return bounds;
}
}  // namespace

ServerMetrics::ServerMetrics(SteadyClockFn clock, RollingWindowOptions window_options,
                             const ExportOptions& export_options)
    : ttft_seconds_(registry_.add_histogram(
          "qwenserve_time_to_first_token_seconds",
          "Time from request arrival to the first generated token, queueing included.",
          latency_buckets_seconds())),
      itl_seconds_(registry_.add_histogram("qwenserve_inter_token_latency_seconds",
                                           "Gap between consecutive generated tokens of a request.",
                                           latency_buckets_seconds())),
      e2e_seconds_(registry_.add_histogram("qwenserve_e2e_request_latency_seconds",
                                           "Time from request arrival to the end of the response.",
                                           latency_buckets_seconds())),
      queue_seconds_(registry_.add_histogram(
          "qwenserve_request_queue_time_seconds",
          "Time from request arrival until it is admitted into the running batch.",
          latency_buckets_seconds())),
      prompt_tokens_(registry_.add_counter("qwenserve_prompt_tokens_total", "Prompt tokens processed.")),
      generation_tokens_(
          registry_.add_counter("qwenserve_generation_tokens_total", "Completion tokens generated.")),
      request_success_(registry_.add_labeled_counter("qwenserve_request_success_total",
                                                     "Requests completed successfully, by finish reason.",
                                                     "finished_reason")),
      http_requests_(registry_.add_labeled_counter("qwenserve_http_requests_total",
                                                   "HTTP responses sent, by status code.", "status")),
      admission_rejections_(registry_.add_counter("qwenserve_admission_rejections_total",
                                                  "Requests rejected by admission control.")),
      running_(registry_.add_gauge("qwenserve_num_requests_running", "Requests in the running batch.")),
      waiting_(registry_.add_gauge("qwenserve_num_requests_waiting", "Requests queued for admission.")),
      kv_cache_usage_(registry_.add_gauge("qwenserve_kv_cache_usage_perc",
                                          "Fraction (0..1) of KV cache blocks in use.")),
      prefix_cache_queries_(registry_.add_counter("qwenserve_prefix_cache_queries_total",
                                                  "Prompt tokens looked up in the prefix cache.")),
      prefix_cache_hits_(registry_.add_counter("qwenserve_prefix_cache_hits_total",
                                               "Prompt tokens whose KV was reused from the prefix cache.")),
      prefill_computed_tokens_(registry_.add_counter("qwenserve_prefill_computed_tokens_total",
                                                     "Prompt tokens actually computed (recomputes included).")),
      preemptions_(registry_.add_counter("qwenserve_num_preemptions_total",
                                         "Times a running sequence was preempted (recomputed later).")),
      spec_draft_tokens_(registry_.add_counter("qwenserve_spec_draft_tokens_total",
                                               "Speculative decoding: draft tokens verified.")),
      spec_accepted_tokens_(registry_.add_counter("qwenserve_spec_accepted_tokens_total",
                                                  "Speculative decoding: draft tokens accepted.")),
      spec_propose_seconds_(registry_.add_total_counter(
          "qwenserve_spec_propose_seconds_total",
          "Speculative decoding: seconds the draft source (n-gram lookup or draft model) took on the engine thread.")),
      spec_propose_steps_(registry_.add_total_counter("qwenserve_spec_propose_steps_total",
                                                      "Speculative decoding: engine steps that asked for drafts.")),
      slo_requests_(registry_.add_labeled_counter("qwenserve_slo_requests_total",
                                                  "Successful requests against the configured SLOs (ttft: TTFT <= SLO; "
                                                  "itl: mean inter-token latency <= SLO).",
                                                  "slo", "result")),
      slo_ttft_seconds_(registry_.add_gauge("qwenserve_slo_ttft_seconds", "Configured TTFT SLO (0: none).")),
      slo_itl_seconds_(registry_.add_gauge("qwenserve_slo_itl_seconds", "Configured mean inter-token latency SLO (0: none).")),
      ttft_prediction_error_(registry_.add_histogram("qwenserve_ttft_prediction_error_seconds",
                                                     "Measured minus predicted time to first token (admission's prediction).",
                                                     signed_latency_buckets_seconds())),
      response_cache_requests_(registry_.add_labeled_counter("qwenserve_response_cache_requests_total",
                                                             "Deterministic requests looked up in the response cache.",
                                                             "result")),
      response_cache_bytes_(registry_.add_gauge("qwenserve_response_cache_bytes", "Bytes held by the response cache.")),
      degraded_(registry_.add_gauge("qwenserve_degraded", "1 while load-adaptive degradation is on, else 0.")),
      degraded_requests_(registry_.add_counter("qwenserve_degraded_requests_total",
                                               "Requests served with degraded defaults (lower max_tokens, no thinking).")),
      structured_output_requests_(registry_.add_labeled_counter(
          "qwenserve_structured_output_requests_total",
          "Requests with structured output (response_format, structured_outputs, grammar, forced tool calls), by type.",
          "type")),
      grammar_compile_seconds_(registry_.add_histogram(
          "qwenserve_grammar_compile_seconds",
          "Time to compile a request's grammar on the HTTP thread (cache hits included).",
          {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
      window_(std::move(clock), window_options) {
  request_success_.with("stop");
  request_success_.with("length");
  for (const char* slo : {"ttft", "itl"}) {
    for (const char* result : {"met", "missed"}) slo_requests_.with(slo, result);
  }
  for (const char* result : {"hit", "miss", "bypass"}) response_cache_requests_.with(result);
  const bool has_cache_info = export_options.kv_blocks > 0;
  if (has_cache_info) {
    registry_.add_gauge(kCacheConfigInfo, kCacheConfigHelp,
                        {{"block_size", std::to_string(export_options.kv_block_size)},
                         {"num_gpu_blocks", std::to_string(export_options.kv_blocks)}})
        .set(1);
  }
  if (!export_options.vllm_compat) return;
  for (const VllmAlias& alias : kVllmAliases) {
    registry_.add_alias(alias.vllm_name, std::string("vLLM-compatible name of ") + alias.qwenserve_name + ".",
                        alias.qwenserve_name, {{"model_name", export_options.model_name}});
  }
  if (has_cache_info) {
    registry_.add_alias("vllm:cache_config_info", std::string("vLLM-compatible name of ") + kCacheConfigInfo + ".",
                        kCacheConfigInfo);
  }
}

void ServerMetrics::record_request(const RequestRecord& record) {
  http_requests_.with(std::to_string(record.status)).inc();
  prompt_tokens_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.prompt_tokens, 0)));
  generation_tokens_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.completion_tokens, 0)));
  prefix_cache_queries_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.prompt_tokens, 0)));
  prefix_cache_hits_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.cached_tokens, 0)));
  prefill_computed_tokens_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.prefill_computed_tokens, 0)));
  preemptions_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.preemptions, 0)));
  spec_draft_tokens_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.spec_draft_tokens, 0)));
  spec_accepted_tokens_.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(record.spec_accepted_tokens, 0)));
  generation_requests_.fetch_add(1, std::memory_order_relaxed);
  if (!record.cache.empty()) response_cache_requests_.with(record.cache).inc();
  if (record.degraded) degraded_requests_.inc();
  if (!record.succeeded()) return;
  if (record.ttft_ms && record.slo_ttft_ms > 0) {
    slo_requests_.with("ttft", *record.ttft_ms <= record.slo_ttft_ms ? "met" : "missed").inc();
  }
  if (!record.itl_ms.empty() && record.slo_itl_ms > 0) {
    double sum = 0;
    for (double gap : record.itl_ms) sum += gap;
    slo_requests_.with("itl", sum / static_cast<double>(record.itl_ms.size()) <= record.slo_itl_ms ? "met" : "missed").inc();
  }
  if (record.ttft_ms && record.predicted_ttft_ms) {
    ttft_prediction_error_.observe(ms_to_seconds(*record.ttft_ms - *record.predicted_ttft_ms));
  }
  request_success_.with(record.finish_reason.empty() ? "unknown" : record.finish_reason).inc();
  queue_seconds_.observe(ms_to_seconds(record.queue_ms));
  if (record.ttft_ms) ttft_seconds_.observe(ms_to_seconds(*record.ttft_ms));
  for (double gap_ms : record.itl_ms) itl_seconds_.observe(ms_to_seconds(gap_ms));
  e2e_seconds_.observe(ms_to_seconds(record.e2e_ms));
  window_.add(record);
  recent_.add(record);
}

void ServerMetrics::record_structured_output(std::string_view type) { structured_output_requests_.with(type).inc(); }

void ServerMetrics::record_grammar_compile(double seconds) { grammar_compile_seconds_.observe(seconds); }

void ServerMetrics::record_http_status(int status) { http_requests_.with(std::to_string(status)).inc(); }

void ServerMetrics::record_admission_rejection() { admission_rejections_.inc(); }

void ServerMetrics::record_slo_rejection() { slo_requests_.with("ttft", "missed").inc(); }

void ServerMetrics::set_num_requests_running(std::int64_t n) { running_.set(static_cast<double>(n)); }

void ServerMetrics::set_num_requests_waiting(std::int64_t n) { waiting_.set(static_cast<double>(n)); }

void ServerMetrics::set_kv_cache_usage(double fraction) {
  kv_cache_usage_.set(std::clamp(fraction, 0.0, 1.0));
}

void ServerMetrics::set_spec_propose(double seconds_total, std::int64_t steps_total) {
  spec_propose_seconds_.set(seconds_total);
  spec_propose_steps_.set(static_cast<double>(steps_total));
}

void ServerMetrics::set_slo(double ttft_s, double itl_s) {
  slo_ttft_seconds_.set(ttft_s);
  slo_itl_seconds_.set(itl_s);
}

void ServerMetrics::set_response_cache_bytes(std::int64_t bytes) { response_cache_bytes_.set(static_cast<double>(bytes)); }

void ServerMetrics::set_degraded(bool degraded) { degraded_.set(degraded ? 1.0 : 0.0); }

std::string ServerMetrics::prometheus_text() const { return registry_.expose_text(); }

nlohmann::json ServerMetrics::stats_json() const {
  nlohmann::json stats = window_.stats_json();
  stats["running"] = static_cast<std::int64_t>(running_.value());
  stats["waiting"] = static_cast<std::int64_t>(waiting_.value());
  stats["kv_cache_usage"] = kv_cache_usage_.value();
  stats["slo"] = {{"ttft_s", slo_ttft_seconds_.value()},
                  {"itl_s", slo_itl_seconds_.value()},
                  {"ttft_met", slo_requests_.value(std::string("ttft\x1fmet"))},
                  {"ttft_missed", slo_requests_.value(std::string("ttft\x1fmissed"))},
                  {"itl_met", slo_requests_.value(std::string("itl\x1fmet"))},
                  {"itl_missed", slo_requests_.value(std::string("itl\x1fmissed"))}};
  stats["prediction_error_ms"] = recent_.prediction_error_json();
  stats["slowest"] = recent_.slowest_json(20);
  stats["response_cache"] = {{"hit", response_cache_requests_.value("hit")},
                             {"miss", response_cache_requests_.value("miss")},
                             {"bypass", response_cache_requests_.value("bypass")},
                             {"bytes", response_cache_bytes_.value()}};
  const std::uint64_t served = generation_requests_.load(std::memory_order_relaxed);
  stats["degraded"] = {{"now", degraded_.value() > 0},
                       {"requests", degraded_requests_.value()},
                       {"share", served > 0 ? static_cast<double>(degraded_requests_.value()) / static_cast<double>(served) : 0.0}};
  return stats;
}

}  // namespace qs::metrics
