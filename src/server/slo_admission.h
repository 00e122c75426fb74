// SLO-aware admission (issue 12): on the HTTP thread, predict a request's time to first token from
// the engine's published load (engine/ttft_predictor.h) and turn it away at once when the
// prediction exceeds its TTFT SLO (the request's "slo_ttft_ms", else --slo-ttft-ms).
#pragma once

#include "engine/engine.h"
#include "metrics/server_metrics.h"
#include "server/generation_job.h"

namespace qs {

/// Requests between their prediction and their submission to the engine (which the engine's
/// snapshot cannot see yet): counted as work ahead (sequences, prompt and max_tokens sums) by the
/// predictions made meanwhile, so that a burst admitted at one instant does not overrun the SLO.
/// Process-wide (one server per process); released by release() or the destructor.
class SloTicket {
 public:
  SloTicket() = default;
  /// Adds `own` to the requests being admitted and returns, in `others`, those that were already.
  SloTicket(const UnseenRequests& own, UnseenRequests& others);
  SloTicket(SloTicket&& other) noexcept : own_(other.own_) { other.own_ = {}; }
  SloTicket& operator=(SloTicket&&) = delete;
  ~SloTicket() { release(); }
  /// Call once the request is in the engine's queue (or turned away).
  void release();

 private:
  UnseenRequests own_;
};

/// Sets job.predicted_ttft_ms (milliseconds from the request's arrival: the time already spent
/// preparing it plus predict_ttft_s of the engine's load snapshot), also without an SLO, so that
/// the prediction error is visible. With an SLO T (job.slo_ttft_ms > 0) and a prediction P with
/// q x P > T (q = slo_calibration().factor() >= 1, the margin of recent prediction errors:
/// server/slo_calibration.h),
/// counts an admission rejection and a TTFT SLO miss (qwenserve_slo_requests_total{slo="ttft",
/// result="missed"}: the promise was not kept for this client) and throws ApiError 429 (type "rate_limit_error", code
/// "slo_ttft_unattainable") with Retry-After max(1, ceil((q x P - T) / 1000)) seconds and a message
/// giving q x P ("predicted time to first token"), T, P and q. Reads a snapshot only: never waits for an engine step.
/// Recovery from a lockout: when the engine is idle (engine_idle: nothing running, queued, taken,
/// submitted or being admitted by another request) and the time already spent is within T, the
/// request is admitted whatever P says. Costs learned from a stalled step (a shared machine's)
/// could otherwise predict every request above T, and with nothing admitted no step would run to
/// measure them again; an idle engine is the one state in which admitting costs no one else
/// anything, and the request's own steps re-measure the costs. Its prediction is still recorded,
/// so the error stays visible.
/// The returned ticket holds the request's tokens in the admitting count until released.
SloTicket admit_by_slo(GenerationJob& job, const Engine& engine, metrics::ServerMetrics& metrics);

/// True when `load` shows no work at all: no running or waiting sequence, none taken into the
/// step in progress, none submitted or being admitted (incoming, which admit_by_slo adds to).
bool engine_idle(const LoadSnapshot& load);

/// The admission rule of admit_by_slo, in milliseconds: admit when there is no SLO (`slo_ms` <= 0),
/// when `predicted_ms` <= `slo_ms`, or when the engine is `idle` and `spent_ms` <= `slo_ms`.
bool slo_admits(double predicted_ms, double spent_ms, double slo_ms, bool idle);

/// Retry-After seconds for a prediction `predicted_ms` against an SLO `slo_ms`:
/// max(1, ceil((predicted_ms - slo_ms) / 1000)).
int slo_retry_after_s(double predicted_ms, double slo_ms);

}  // namespace qs
