#include "server/slo_admission.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "server/api_error.h"
#include "server/slo_calibration.h"

namespace qs {

namespace {

std::mutex g_admitting_mutex;
UnseenRequests g_admitting;  // guarded by g_admitting_mutex

}  // namespace

SloTicket::SloTicket(const UnseenRequests& own, UnseenRequests& others) : own_(own) {
  std::lock_guard<std::mutex> lock(g_admitting_mutex);
  others = g_admitting;
  g_admitting.sequences += own.sequences;
  g_admitting.prompt_tokens += own.prompt_tokens;
  g_admitting.max_tokens += own.max_tokens;
}

void SloTicket::release() {
  if (own_.sequences == 0) return;
  std::lock_guard<std::mutex> lock(g_admitting_mutex);
  g_admitting.sequences -= own_.sequences;
  g_admitting.prompt_tokens -= own_.prompt_tokens;
  g_admitting.max_tokens -= own_.max_tokens;
  own_ = {};
}

bool engine_idle(const LoadSnapshot& load) {
  return load.running.empty() && load.waiting.empty() && load.taken.sequences == 0 && load.incoming.sequences == 0;
}

bool slo_admits(double predicted_ms, double spent_ms, double slo_ms, bool idle) {
  if (slo_ms <= 0 || predicted_ms <= slo_ms) return true;
  return idle && spent_ms <= slo_ms;  // the recovery from a lockout (header)
}

int slo_retry_after_s(double predicted_ms, double slo_ms) {
  return static_cast<int>(std::max(1.0, std::ceil((predicted_ms - slo_ms) / 1000.0)));
}

SloTicket admit_by_slo(GenerationJob& job, const Engine& engine, metrics::ServerMetrics& metrics) {
  const auto n = static_cast<int64_t>(job.choices.size());
  const auto prompt = static_cast<int64_t>(job.prompt_ids.size());
  const int64_t max_tokens = job.choices.empty() ? 0 : job.choices.front().max_tokens;
  UnseenRequests others;
  SloTicket ticket(UnseenRequests{n, n * prompt, n * max_tokens}, others);
  const double spent_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - job.arrival).count();
  LoadSnapshot load = engine.load_snapshot();
  // Predicted meanwhile, not yet submitted: they join the engine's queue with the submitted ones.
  load.incoming.sequences += others.sequences;
  load.incoming.prompt_tokens += others.prompt_tokens;
  load.incoming.max_tokens += others.max_tokens;
  const double ahead_s = predict_ttft_s(load, prompt, job.priority, n);
  job.predicted_ttft_ms = spent_ms + ahead_s * 1000.0;
  const double margin = slo_calibration().factor();  // >= 1 (server/slo_calibration.h)
  const double judged_ms = job.predicted_ttft_ms * margin;
  if (slo_admits(judged_ms, spent_ms, job.slo_ttft_ms, engine_idle(load))) return ticket;
  metrics.record_admission_rejection();
  metrics.record_slo_rejection();
  char message[320];
  std::snprintf(message, sizeof message,
                "server overloaded: predicted time to first token %.3f ms exceeds the TTFT SLO of %.3f ms "
                "(slo_ttft_ms / --slo-ttft-ms; the prediction is the model's %.3f ms x %.3f, the margin of "
                "its recent errors); retry later",
                judged_ms, job.slo_ttft_ms, job.predicted_ttft_ms, margin);
  throw ApiError(429, message, "", "rate_limit_error", "slo_ttft_unattainable")
      .with_retry_after(slo_retry_after_s(judged_ms, job.slo_ttft_ms));
}

}  // namespace qs
