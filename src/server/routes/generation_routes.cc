#include "server/routes/generation_routes.h"

#include <memory>
#include <string>
#include <vector>

#include <chrono>
#include <cstdio>

#include "metrics/request_log.h"
#include "server/api_error.h"
#include "server/degradation.h"
#include "server/latency_breakdown.h"
#include "server/slo_admission.h"
#include "server/client_socket.h"
#include "server/generation_job.h"
#include "server/openai_request.h"
#include "server/response_builder.h"
#include "server/routes/http_reply.h"

namespace qs {
namespace {

// Load shedding before any parsing, templating or tokenizing: a place in the waiting queue is
// reserved first, so an overloaded or draining server answers 429 / 503 with almost no work,
// even to a burst that arrives all at once.
QueueSlot admission_precheck(const GenerationRouteContext& ctx) {
  if (!ctx.accepting_requests()) {
    ctx.metrics.record_admission_rejection();
    // Requests reach this only once the server listens (after the warm-up): not accepting means
    // draining, the code /ready and the requests cut by the drain carry.
    throw ApiError(503, "the server is shutting down; retry later", "", "service_unavailable", "server_shutdown");
  }
  QueueSlot slot = ctx.engine.reserve_queue_slot();
  if (!slot) {
    ctx.metrics.record_admission_rejection();
    throw ApiError(429, "server overloaded: " + std::to_string(ctx.engine.options().max_queue) +
                            " requests already wait (--max-queue); retry later",
                   "", "rate_limit_error", "queue_full");
  }
  return slot;
}

// The x-request-id header of a response: the client's own X-Request-Id when it sent one (as vLLM
// echoes it), else the id of the response (as its API shows it).
const std::string& response_request_id(const GenerationJob& job) {
  if (!job.client_request_id.empty()) return job.client_request_id;
  return job.response_id.empty() ? job.id : job.response_id;
}

// A cached response (deterministic request seen before): JSON or SSE, without the engine.
void answer_from_cache(const GenerationRouteContext& ctx, GenerationJob& job, const CachedResponse& cached,
                       httplib::Response& res) {
  std::vector<ChoiceState> choices = from_cached(cached);
  const Tokenizer& tokenizer = ctx.job_context.tokenizer;
  res.set_header("x-request-id", response_request_id(job));
  res.set_header("x-qwenserve-cache", "hit");
  metrics::RequestRecord record;
  record.id = job.id;
  record.request_id = job.client_request_id;
  record.prompt_tokens = static_cast<int64_t>(job.prompt_ids.size());
  for (const auto& c : choices) record.completion_tokens += c.completion_tokens;
  record.finish_reason = choices.empty() ? std::string() : choices.front().finish_reason;
  record.stop_cause = choices.empty() ? std::string() : choices.front().stop_cause;
  record.cache = "hit";
  record.degraded = job.degraded;
  record.temperature = job.temperature;
  record.top_p = job.top_p;
  record.max_tokens = job.max_tokens;
  std::string body;
  if (job.stream) {
    StreamEncoder encoder(job, tokenizer, choices.size());
    body = encoder.role_chunks();
    for (size_t i = 0; i < choices.size(); ++i) {
      EngineEvent event;
      event.kind = EngineEvent::Kind::kFinished;
      event.text = choices[i].text;
      event.token_ids = choices[i].tokens;
      event.logprobs = choices[i].logprobs;
      event.finish_reason = choices[i].finish_reason;
      body += encoder.event_chunks(i, event, choices[i]);
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - job.arrival).count();
  record.ttft_ms = ms;
  record.e2e_ms = ms;
  if (job.stream) {
    const nlohmann::json timings = timings_json(record);
    body += StreamEncoder(job, tokenizer, choices.size()).final_chunks(choices, job.include_timings ? &timings : nullptr);
    res.set_header("Cache-Control", "no-cache");
    res.status = 200;
    res.set_content(body, "text/event-stream");
  } else {
    res.set_header("Server-Timing", server_timing_header(record));
    send_json(res, 200, build_response(job, choices, tokenizer));
  }
  record.status = 200;
  ctx.metrics.record_request(record);
  if (job.log_format == GenerationJob::LogFormat::kJson) std::fprintf(stderr, "%s\n", metrics::request_log_line(record).c_str());
}

// Admission happens before any response byte: a rejected request (400 / 429 / 503, with
// Retry-After for the last two) never gets a 200, streaming or not.
void run_job(const GenerationRouteContext& ctx, GenerationJob job, QueueSlot slot, const nlohmann::ordered_json& body,
             const httplib::Request* req, httplib::Response& res, std::shared_ptr<ResponseAdapter> adapter = nullptr) {
  const std::string& log_format = ctx.options.log_format;
  job.log_format = log_format == "text"   ? GenerationJob::LogFormat::kText
                   : log_format == "none" ? GenerationJob::LogFormat::kNone
                                          : GenerationJob::LogFormat::kJson;
  const Tokenizer& tokenizer = ctx.job_context.tokenizer;
  if (req != nullptr) job.client_request_id = client_request_id(*req);
  if (job.degraded) res.set_header("x-qwenserve-degraded", "1");
  const bool allowed = cache_allowed_by(body);  // a wrong-typed "cache" is a 400 with the cache off as well
  if (ctx.response_cache && !adapter) {  // cached answers are chat-shaped: none for adapted APIs
    const EngineRequest& first = job.choices.front();
    job.cache_key = response_cache_key(body, job.api == GenerationJob::Api::kChat ? "chat" : "completions", job.model,
                                       job.prompt_ids, first.sampling.temperature, first.sampling.top_k,
                                       first.sampling.seed.has_value());
    if (!job.cache_key.empty()) {
      job.cache = allowed ? "miss" : "bypass";
      if (allowed) {
        if (auto cached = ctx.response_cache->find(job.cache_key)) {
          answer_from_cache(ctx, job, *cached, res);
          return;
        }
      }
      res.set_header("x-qwenserve-cache", job.cache);
    }
  }
  SloTicket ticket = admit_by_slo(job, ctx.engine, ctx.metrics);
  std::shared_ptr<ResponseCache> cache = job.cache == "miss" ? ctx.response_cache : nullptr;
  const bool stream = job.stream;
  job.on_success = [cache, key = job.cache_key, &metrics = ctx.metrics, stream, &res](
                       const std::vector<ChoiceState>& choices, const metrics::RequestRecord& record) {
    if (!stream) res.set_header("Server-Timing", server_timing_header(record));
    if (cache) {
      cache->insert(key, to_cached(choices));
      metrics.set_response_cache_bytes(static_cast<int64_t>(cache->bytes()));
    }
  };
  std::vector<ChoiceState> choices = submit_job(job, ctx.engine, ctx.metrics, &slot);
  ticket.release();  // now in the engine's incoming count
  res.set_header("x-request-id", response_request_id(job));
  if (!job.stream) {
    // A client that hangs up stops its generation within one engine step.
    const std::function<bool()> gone =
        req != nullptr ? disconnect_probe(req->remote_addr, req->remote_port, req->local_port) : std::function<bool()>();
    nlohmann::json completion = run_generation(std::move(job), std::move(choices), tokenizer, ctx.metrics, gone);
    send_json(res, 200, adapter ? adapter->body(completion) : completion);
    return;
  }
  // With --max-queue-wait the stream starts only once the request runs, so that a queue
  // timeout is still a 429 (without it, queued streams get keep-alive comments meanwhile).
  if (ctx.engine.options().max_queue_wait_s > 0) await_admission(job, choices, ctx.metrics);
  auto shared_job = std::make_shared<GenerationJob>(std::move(job));
  auto shared_choices = std::make_shared<std::vector<ChoiceState>>(std::move(choices));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&tokenizer, &metrics = ctx.metrics, keepalive_ms = ctx.options.keepalive_ms, shared_job, shared_choices,
       adapter](size_t, httplib::DataSink& sink) {
        stream_generation(std::move(*shared_job), std::move(*shared_choices), tokenizer, metrics,
                          [&sink, &adapter](const std::string& chat_bytes) {
                            const std::string bytes = adapter ? adapter->stream(chat_bytes) : chat_bytes;
                            if (bytes.empty()) return sink.is_writable();
                            return sink.is_writable() && sink.write(bytes.data(), bytes.size());
                          },
                          keepalive_ms);
        sink.done();
        return true;
      });
}

// Degradation is decided once per request from the engine's published stats.
bool degrade(const GenerationRouteContext& ctx) {
  const bool on = degraded_now(ctx.options, ctx.engine.stats());
  if (ctx.options.degrade_at_kv > 0 || ctx.options.degrade_at_queue > 0) ctx.metrics.set_degraded(on);
  return on;
}

}  // namespace

QueueSlot reserve_generation_slot(const GenerationRouteContext& ctx) { return admission_precheck(ctx); }

std::string client_request_id(const httplib::Request& req) {
  const std::string value = req.get_header_value("X-Request-Id");
  if (value.empty() || value.size() > kMaxClientRequestIdBytes) return {};
  for (const char c : value) {
    if (c < 0x21 || c > 0x7e) return {};
  }
  return value;
}

void run_adapted_chat(const GenerationRouteContext& ctx, const httplib::Request& req, const ChatRequest& request,
                      QueueSlot slot, std::shared_ptr<ResponseAdapter> adapter, httplib::Response& res) {
  GenerationJob job = build_chat_job(request, ctx.job_context);
  job.include_usage = true;
  job.report_stop_cause = true;
  job.response_id = adapter->response_id(job.id);
  adapter->on_job(job);
  run_job(ctx, std::move(job), std::move(slot), nlohmann::ordered_json(), &req, res, std::move(adapter));
}

void handle_chat_completions(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  QueueSlot slot = admission_precheck(ctx);
  const nlohmann::ordered_json body = parse_json_body(req);
  ChatRequest request = parse_chat_request(body, ctx.job_context.tokenizer.vocab_size());
  JobContext job_context = ctx.job_context;
  const bool degraded = degrade(ctx);
  if (degraded) {
    job_context.default_max_tokens = ctx.options.degraded_max_tokens;
    if (template_has_thinking_switch(ctx.job_context.chat_template.source()) &&
        !request.chat_template_kwargs.contains("enable_thinking")) {
      request.chat_template_kwargs["enable_thinking"] = false;
    }
  }
  GenerationJob job = build_chat_job(request, job_context);
  job.degraded = degraded;
  run_job(ctx, std::move(job), std::move(slot), body, &req, res);
}

void handle_completions(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  QueueSlot slot = admission_precheck(ctx);
  const nlohmann::ordered_json body = parse_json_body(req);
  const CompletionRequest request = parse_completion_request(body, ctx.job_context.tokenizer.vocab_size());
  JobContext job_context = ctx.job_context;
  const bool degraded = degrade(ctx);
  if (degraded) job_context.default_max_tokens = ctx.options.degraded_max_tokens;
  GenerationJob job = build_completion_job(request, job_context);
  job.degraded = degraded;
  run_job(ctx, std::move(job), std::move(slot), body, &req, res);
}

}  // namespace qs
