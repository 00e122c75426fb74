#include "server/routes/generation_routes.h"

#include <memory>
#include <string>
#include <vector>

#include "server/api_error.h"
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
    throw ApiError(503, "the server is not ready (loading or draining); retry later", "", "service_unavailable",
                   "not_ready");
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

// Admission happens before any response byte: a rejected request (400 / 429 / 503, with
// Retry-After for the last two) never gets a 200, streaming or not.
void run_job(const GenerationRouteContext& ctx, GenerationJob job, QueueSlot slot, httplib::Response& res) {
  const std::string& log_format = ctx.options.log_format;
  job.log_format = log_format == "text"   ? GenerationJob::LogFormat::kText
                   : log_format == "none" ? GenerationJob::LogFormat::kNone
                                          : GenerationJob::LogFormat::kJson;
  const Tokenizer& tokenizer = ctx.job_context.tokenizer;
  std::vector<ChoiceState> choices = submit_job(job, ctx.engine, ctx.metrics, &slot);
  res.set_header("x-request-id", job.id);
  if (!job.stream) {
    send_json(res, 200, run_generation(std::move(job), std::move(choices), tokenizer, ctx.metrics));
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
      [&tokenizer, &metrics = ctx.metrics, keepalive_ms = ctx.options.keepalive_ms, shared_job, shared_choices](
          size_t, httplib::DataSink& sink) {
        stream_generation(std::move(*shared_job), std::move(*shared_choices), tokenizer, metrics,
                          [&sink](const std::string& bytes) { return sink.is_writable() && sink.write(bytes.data(), bytes.size()); },
                          keepalive_ms);
        sink.done();
        return true;
      });
}

}  // namespace

void handle_chat_completions(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  QueueSlot slot = admission_precheck(ctx);
  const ChatRequest request = parse_chat_request(parse_json_body(req), ctx.job_context.tokenizer.vocab_size());
  run_job(ctx, build_chat_job(request, ctx.job_context), std::move(slot), res);
}

void handle_completions(const GenerationRouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  QueueSlot slot = admission_precheck(ctx);
  const CompletionRequest request = parse_completion_request(parse_json_body(req), ctx.job_context.tokenizer.vocab_size());
  run_job(ctx, build_completion_job(request, ctx.job_context), std::move(slot), res);
}

}  // namespace qs
