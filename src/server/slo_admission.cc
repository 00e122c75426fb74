#include "server/slo_admission.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "server/api_error.h"

namespace qs {

namespace {
std::atomic<int64_t> g_admitting_tokens{0};
}  // namespace

SloTicket::SloTicket(int64_t tokens) : tokens_(tokens) { g_admitting_tokens.fetch_add(tokens); }

void SloTicket::release() {
  if (tokens_ != 0) g_admitting_tokens.fetch_sub(tokens_);
  tokens_ = 0;
}

int slo_retry_after_s(double predicted_ms, double slo_ms) {
  return static_cast<int>(std::max(1.0, std::ceil((predicted_ms - slo_ms) / 1000.0)));
}

SloTicket admit_by_slo(GenerationJob& job, const Engine& engine, metrics::ServerMetrics& metrics) {
  const auto own = static_cast<int64_t>(job.prompt_ids.size() * job.choices.size());
  const int64_t others = g_admitting_tokens.load();
  SloTicket ticket(own);
  const double spent_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - job.arrival).count();
  LoadSnapshot load = engine.load_snapshot();
  load.incoming_tokens += others;  // predicted meanwhile, not yet submitted
  const double ahead_s = predict_ttft_s(load, static_cast<int64_t>(job.prompt_ids.size()), job.priority,
                                        static_cast<int64_t>(job.choices.size()));
  job.predicted_ttft_ms = spent_ms + ahead_s * 1000.0;
  if (job.slo_ttft_ms <= 0 || job.predicted_ttft_ms <= job.slo_ttft_ms) return ticket;
  metrics.record_admission_rejection();
  char message[256];
  std::snprintf(message, sizeof message,
                "server overloaded: predicted time to first token %.3f ms exceeds the TTFT SLO of %.3f ms "
                "(slo_ttft_ms / --slo-ttft-ms); retry later",
                job.predicted_ttft_ms, job.slo_ttft_ms);
  throw ApiError(429, message, "", "rate_limit_error", "slo_ttft_unattainable")
      .with_retry_after(slo_retry_after_s(job.predicted_ttft_ms, job.slo_ttft_ms));
}

}  // namespace qs
