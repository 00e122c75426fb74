#include "server/generation_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "metrics/request_log.h"
#include "server/api_error.h"
#include "server/latency_breakdown.h"
#include "server/response_builder.h"
#include "server/slo_calibration.h"

namespace qs {
namespace {

double ms_between(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Latency bookkeeping of one request, measured on the server (steady clock).
struct LatencyTracker {
  SteadyClock::time_point arrival;
  std::optional<SteadyClock::time_point> first_token;
  SteadyClock::time_point last_token;
  std::vector<double> itl_ms;

  void token_written(SteadyClock::time_point now) {
    if (!first_token) {
      first_token = now;
    } else {
      itl_ms.push_back(ms_between(last_token, now));
    }
    last_token = now;
  }
};

metrics::RequestRecord make_record(const GenerationJob& job, const std::vector<ChoiceState>& choices,
                                   const LatencyTracker& latency, int status) {
  metrics::RequestRecord r;
  r.id = job.response_id.empty() ? job.id : job.response_id;
  r.request_id = job.client_request_id;
  r.status = status;
  r.prompt_tokens = static_cast<int64_t>(job.prompt_ids.size());
  double queue_ms = 0;
  for (const auto& c : choices) {
    r.completion_tokens += c.completion_tokens;
    queue_ms = std::max(queue_ms, c.queue_ms);
    if (!c.error.empty()) r.error = c.error;
    if (r.finish_reason.empty()) r.finish_reason = c.finish_reason;
    if (r.stop_cause.empty()) r.stop_cause = c.stop_cause;
    r.prefill_computed_tokens += c.prefill_computed_tokens;
    r.preemptions += c.preemptions;
    r.spec_draft_tokens += c.spec_draft_tokens;
    r.spec_accepted_tokens += c.spec_accepted_tokens;
  }
  if (!choices.empty()) r.cached_tokens = choices.front().cached_tokens;
  r.queue_ms = queue_ms;
  if (latency.first_token) {
    r.ttft_ms = ms_between(latency.arrival, *latency.first_token);
    r.prefill_ms = std::max(0.0, *r.ttft_ms - queue_ms);
    r.decode_ms = ms_between(*latency.first_token, latency.last_token);
  }
  if (job.predicted_ttft_ms >= 0) r.predicted_ttft_ms = job.predicted_ttft_ms;
  r.slo_ttft_ms = job.slo_ttft_ms;
  r.slo_itl_ms = job.slo_itl_ms;
  r.degraded = job.degraded;
  r.cache = job.cache;
  r.itl_ms = latency.itl_ms;
  r.e2e_ms = ms_between(latency.arrival, SteadyClock::now());
  r.temperature = job.temperature;
  r.top_p = job.top_p;
  r.max_tokens = job.max_tokens;
  return r;
}

void finish_record(const GenerationJob& job, metrics::ServerMetrics& metrics,
                   const metrics::RequestRecord& record) {
  metrics.record_request(record);
  if (record.status == 200 && record.ttft_ms && record.predicted_ttft_ms && job.slo_ttft_ms > 0) {
    slo_calibration().record(*record.predicted_ttft_ms, *record.ttft_ms, job.slo_ttft_ms);
  }
  if (job.log_format == GenerationJob::LogFormat::kJson) {
    const std::string line = metrics::request_log_line(record);
    std::fprintf(stderr, "%s\n", line.c_str());
  } else if (job.log_format == GenerationJob::LogFormat::kText) {
    std::fprintf(stderr,
                 "%s status=%d finish=%s stop_cause=%s prompt=%lld cached=%lld completion=%lld ttft_ms=%.1f "
                 "e2e_ms=%.1f\n",
                 record.id.c_str(), record.status, record.finish_reason.c_str(),
                 record.stop_cause.empty() ? "-" : record.stop_cause.c_str(),
                 static_cast<long long>(record.prompt_tokens), static_cast<long long>(record.cached_tokens),
                 static_cast<long long>(record.completion_tokens), record.ttft_ms.value_or(-1),
                 record.e2e_ms);
  }
}

bool is_admission_rejection(EngineErrorCode code) {
  return code == EngineErrorCode::kQueueFull || code == EngineErrorCode::kQueueTimeout ||
         code == EngineErrorCode::kShuttingDown;
}

// The next event of a choice: replayed ones first, then the engine's. False on timeout.
bool next_event(ChoiceState& c, EngineEvent& event, std::chrono::milliseconds wait) {
  if (!c.pending.empty()) {
    event = std::move(c.pending.front());
    c.pending.pop_front();
    return true;
  }
  return c.stream->pop(event, wait);
}

// The first failed choice, or null.
const ChoiceState* first_error(const std::vector<ChoiceState>& choices) {
  for (const auto& c : choices) {
    if (!c.error.empty()) return &c;
  }
  return nullptr;
}

}  // namespace

int http_status_for(EngineErrorCode code) {
  switch (code) {
    case EngineErrorCode::kInvalid:
    case EngineErrorCode::kGrammar: return 400;
    case EngineErrorCode::kQueueFull:
    case EngineErrorCode::kQueueTimeout: return 429;
    case EngineErrorCode::kTimeout: return 408;
    case EngineErrorCode::kShuttingDown:
    case EngineErrorCode::kAborted: return 503;
    default: return 500;
  }
}

ApiError engine_api_error(EngineErrorCode code, const std::string& message, const std::string& grammar_param) {
  const int status = http_status_for(code);
  switch (code) {
    case EngineErrorCode::kQueueFull: return ApiError(status, message, "", "rate_limit_error", "queue_full");
    case EngineErrorCode::kQueueTimeout: return ApiError(status, message, "", "rate_limit_error", "queue_timeout");
    case EngineErrorCode::kShuttingDown: return ApiError(status, message, "", "service_unavailable", "draining");
    case EngineErrorCode::kAborted: return ApiError(status, message, "", "service_unavailable", "server_shutdown");
    case EngineErrorCode::kTimeout: return ApiError(status, message, "timeout", "timeout", "request_timeout");
    case EngineErrorCode::kInvalid: return ApiError(status, message, "max_tokens", "invalid_request_error", "context_length_exceeded");
    case EngineErrorCode::kGrammar: return ApiError(status, message, grammar_param, "invalid_request_error", "invalid_value");
    default: return ApiError(status, message, "", "server_error");
  }
}

void ChoiceState::apply(const EngineEvent& event) {
  if (event.queue_ms >= 0) {
    queue_ms = event.queue_ms;
    admitted = true;
  }
  if (event.prompt_tokens > 0) prompt_tokens = event.prompt_tokens;
  completion_tokens = std::max(completion_tokens, event.completion_tokens);
  text += event.text;
  tokens.insert(tokens.end(), event.token_ids.begin(), event.token_ids.end());
  logprobs.insert(logprobs.end(), event.logprobs.begin(), event.logprobs.end());
  if (event.kind == EngineEvent::Kind::kDelta) return;
  cached_tokens = event.cached_tokens;
  prefill_computed_tokens = event.prefill_computed_tokens;
  preemptions = event.preemptions;
  spec_draft_tokens = event.spec_draft_tokens;
  spec_accepted_tokens = event.spec_accepted_tokens;
  done = true;
  if (event.kind == EngineEvent::Kind::kFinished) {
    finish_reason = event.finish_reason;
    stop_cause = event.stop_cause;
  } else {
    error = event.error;
    error_code = event.error_code;
    finish_reason = "error";
  }
}

std::vector<ChoiceState> submit_job(const GenerationJob& job, Engine& engine, metrics::ServerMetrics& metrics,
                                    QueueSlot* slot) {
  std::vector<ChoiceState> choices;
  for (const auto& request : job.choices) {
    SubmitResult submitted = engine.try_submit(request, choices.empty() ? slot : nullptr);
    if (!submitted.stream) {
      for (auto& c : choices) c.stream->cancel();
      if (is_admission_rejection(submitted.rejection)) metrics.record_admission_rejection();
      throw engine_api_error(submitted.rejection, submitted.message);
    }
    ChoiceState c;
    c.stream = std::move(submitted.stream);
    choices.push_back(std::move(c));
  }
  return choices;
}

void await_admission(const GenerationJob& job, std::vector<ChoiceState>& choices, metrics::ServerMetrics& metrics) {
  for (auto& c : choices) {
    bool started = false;
    while (!started) {
      EngineEvent event;
      if (!c.stream->pop(event, std::chrono::milliseconds(1000))) continue;
      started = event.queue_ms >= 0 || event.kind != EngineEvent::Kind::kDelta;
      if (event.kind == EngineEvent::Kind::kError) {
        for (auto& other : choices) other.stream->cancel();
        c.apply(event);
        const ApiError error = engine_api_error(event.error_code, event.error, job.structured_param);
        if (is_admission_rejection(event.error_code)) metrics.record_admission_rejection();
        finish_record(job, metrics, make_record(job, choices, LatencyTracker{job.arrival, {}, {}, {}}, error.status()));
        throw error;
      }
      c.pending.push_back(std::move(event));
    }
  }
}

nlohmann::json run_generation(GenerationJob job, std::vector<ChoiceState> choices, const Tokenizer& tokenizer,
                              metrics::ServerMetrics& metrics, const std::function<bool()>& client_gone) {
  LatencyTracker latency{job.arrival, {}, {}, {}};
  bool cancelled = false;
  for (auto& c : choices) {
    while (!c.done) {
      EngineEvent event;
      const bool got = next_event(c, event, std::chrono::milliseconds(client_gone ? 100 : 1000));
      if (client_gone && !cancelled && client_gone()) {
        cancelled = true;
        for (auto& other : choices) other.stream->cancel();
      }
      if (!got) continue;
      if (!event.token_ids.empty()) latency.token_written(SteadyClock::now());
      c.apply(event);
      if (c.done && !c.error.empty()) {
        for (auto& other : choices) other.stream->cancel();  // the response fails as a whole
      }
    }
  }
  if (cancelled) {
    // Logged and counted as the streaming path does (499, "client disconnected"); the engine's
    // last event gave finish_reason "cancelled" and the exact completion_tokens. The 499 body
    // goes to a closed socket.
    metrics::RequestRecord record = make_record(job, choices, latency, 499);
    record.error = "client disconnected";
    finish_record(job, metrics, record);
    throw ApiError(499, "client disconnected", "", "invalid_request_error", "client_disconnected");
  }
  if (const ChoiceState* failed = first_error(choices)) {
    const ApiError error = engine_api_error(failed->error_code, failed->error, job.structured_param);
    if (is_admission_rejection(failed->error_code)) metrics.record_admission_rejection();
    finish_record(job, metrics, make_record(job, choices, latency, error.status()));
    throw error;
  }
  const metrics::RequestRecord record = make_record(job, choices, latency, 200);
  if (job.on_success) job.on_success(choices, record);
  finish_record(job, metrics, record);
  return build_response(job, choices, tokenizer);
}

void stream_generation(GenerationJob job, std::vector<ChoiceState> choices, const Tokenizer& tokenizer,
                       metrics::ServerMetrics& metrics, const ChunkWriter& write, int64_t keepalive_ms) {
  LatencyTracker latency{job.arrival, {}, {}, {}};
  StreamEncoder encoder(job, tokenizer, choices.size());
  bool client_gone = !write(encoder.role_chunks());
  auto last_write = SteadyClock::now();
  size_t n_done = 0;
  while (n_done < choices.size() && !client_gone) {
    bool progressed = false;
    for (size_t i = 0; i < choices.size() && !client_gone; ++i) {
      ChoiceState& c = choices[i];
      if (c.done) continue;
      EngineEvent event;
      const auto wait = std::chrono::milliseconds(choices.size() == 1 ? 200 : 5);
      if (!next_event(c, event, wait)) continue;
      progressed = true;
      c.apply(event);
      // TTFT and ITL count generated tokens as they arrive, as the non-streaming path does, also
      // when the encoder holds their text back (a partial stop string, whitespace that may precede
      // <think>) and sends it with a later token.
      if (!event.token_ids.empty()) latency.token_written(SteadyClock::now());
      const std::string bytes = encoder.event_chunks(i, event, c);
      if (!bytes.empty()) {
        client_gone = !write(bytes);
        last_write = SteadyClock::now();
      }
      if (c.done) ++n_done;
    }
    if (!progressed && !client_gone &&
        ms_between(last_write, SteadyClock::now()) >= static_cast<double>(keepalive_ms)) {
      client_gone = !write(": keep-alive\n\n");
      last_write = SteadyClock::now();
    }
  }
  if (client_gone) {
    for (auto& c : choices) c.stream->cancel();
    // The engine ends a cancelled sequence within a step with a last event (finish_reason
    // "cancelled", the exact completion_tokens): wait for it, as the non-streaming path does, so
    // the log line and the token counters agree. Bounded: a stuck engine cannot hold the worker.
    const auto give_up = SteadyClock::now() + std::chrono::seconds(2);
    for (auto& c : choices) {
      while (!c.done && SteadyClock::now() < give_up) {
        EngineEvent event;
        if (next_event(c, event, std::chrono::milliseconds(20))) c.apply(event);
      }
    }
    metrics::RequestRecord record = make_record(job, choices, latency, 499);
    if (record.finish_reason.empty()) record.finish_reason = "cancelled";
    record.error = "client disconnected";
    finish_record(job, metrics, record);
    return;
  }
  metrics::RequestRecord record = make_record(job, choices, latency, 200);
  const nlohmann::json timings = timings_json(record);
  write(encoder.final_chunks(choices, job.include_timings ? &timings : nullptr));
  record.e2e_ms = ms_between(job.arrival, SteadyClock::now());
  if (job.on_success) job.on_success(choices, record);
  finish_record(job, metrics, record);
}

}  // namespace qs
