#include "engine/engine.h"

#include <algorithm>
#include <chrono>


#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/draft_model_proposer.h"
#include "engine/sequence.h"

namespace qs {
namespace {

EngineOptions clamped(EngineOptions options, const Backend& backend) {
  options.max_batched_tokens = std::clamp<int64_t>(options.max_batched_tokens, 1, backend.limits().max_batch_tokens);
  options.max_num_seqs = static_cast<int32_t>(
      std::clamp<int64_t>(options.max_num_seqs, 1, std::min<int64_t>(options.max_batched_tokens, backend.limits().max_seqs)));
  options.spec.draft_max = std::clamp(options.spec.draft_max, 0, kMaxDraftTokens);
  options.prefill_min_chunk = std::max<int64_t>(options.prefill_min_chunk, 1);
  options.itl_limit_s = std::max(options.itl_limit_s, 0.0);
  return options;
}

EngineEvent error_event(EngineErrorCode code, std::string message) {
  EngineEvent event;
  event.kind = EngineEvent::Kind::kError;
  event.error_code = code;
  event.error = std::move(message);
  return event;
}

}  // namespace

Engine::Engine(Backend& backend, const Tokenizer& tokenizer, EngineOptions options, Backend* draft_backend)
    : backend_(backend),
      tokenizer_(tokenizer),
      options_(clamped(options, backend)),
      blocks_(backend.kv_blocks(), options_.prefix_caching),
      scheduler_(blocks_, SchedulerOptions{options_.max_num_seqs, options_.max_batched_tokens}),
      prefill_budget_(options_.prefill_slack, options_.max_batched_tokens, options_.prefill_min_chunk, options_.max_num_seqs,
                      options_.itl_limit_s),
      step_runner_(backend),
      mask_workers_(std::max(0, options_.mask_threads)),
      step_costs_(options_.max_num_seqs) {
  proposer_ = make_draft_proposer(options_.spec, backend, draft_backend);
  blank_token_.assign(static_cast<size_t>(backend.vocab_rows()), -1);
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Engine::context_tokens() const {
  return std::min<int64_t>(backend_.limits().max_context_tokens, static_cast<int64_t>(backend_.kv_blocks()) * kKvBlockSize);
}

QueueSlot Engine::reserve_queue_slot() {
  int64_t n = n_waiting_.load();
  do {
    if (options_.max_queue > 0 && n >= options_.max_queue) return QueueSlot();
  } while (!n_waiting_.compare_exchange_weak(n, n + 1));
  return QueueSlot(&n_waiting_);
}

SubmitResult Engine::try_submit(EngineRequest request, QueueSlot* slot) {
  SubmitResult result;
  const int64_t needed = static_cast<int64_t>(request.prompt_ids.size()) + request.max_tokens;
  const int64_t kv_tokens = static_cast<int64_t>(backend_.kv_blocks()) * kKvBlockSize;
  const int64_t max_context = backend_.limits().max_context_tokens;
  if (request.prompt_ids.empty()) {
    result.rejection = EngineErrorCode::kInvalid;
    result.message = "the prompt is empty";
    return result;
  }
  if (needed > max_context || needed > kv_tokens) {
    const bool kv = needed <= max_context;
    result.rejection = EngineErrorCode::kInvalid;
    result.message = "request needs " + std::to_string(needed) + " tokens of context (prompt " +
                     std::to_string(request.prompt_ids.size()) + " + max_tokens " +
                     std::to_string(request.max_tokens) + "), the " +
                     (kv ? "KV cache holds " + std::to_string(kv_tokens)
                         : "engine has " + std::to_string(max_context));
    return result;
  }
  if (request.grammar && request.grammar->vocab->rows() != backend_.vocab_rows()) {
    result.rejection = EngineErrorCode::kInvalid;
    result.message = "structured output: the grammar was compiled for " + std::to_string(request.grammar->vocab->rows()) +
                     " logits rows, the model has " + std::to_string(backend_.vocab_rows());
    return result;
  }
  uint64_t seq_id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq_id = next_seq_id_++;
  }
  auto seq = std::make_unique<EngineSequence>(std::move(request), tokenizer_, backend_.vocab_rows(), options_.guard, seq_id);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) {
      result.rejection = EngineErrorCode::kShuttingDown;
      result.message = "the engine is shutting down";
      return result;
    }
    const bool reserved = slot != nullptr && *slot;
    if (!reserved && options_.max_queue > 0 && n_waiting_.load() >= options_.max_queue) {
      result.rejection = EngineErrorCode::kQueueFull;
      result.message = "server overloaded: " + std::to_string(options_.max_queue) +
                       " requests already wait (--max-queue); retry later";
      return result;
    }
    result.stream = seq->stream;
    unseen_incoming_.add(1, seq->n_prompt, seq->request.max_tokens);
    incoming_.push_back(std::move(seq));
    n_in_flight_.fetch_add(1);
    if (reserved) {
      slot->counter_ = nullptr;  // the reservation is now this request's place in the queue
    } else {
      n_waiting_.fetch_add(1);
    }
  }
  cv_.notify_one();
  return result;
}

std::shared_ptr<RequestStream> Engine::submit(EngineRequest request) {
  SubmitResult result = try_submit(std::move(request));
  if (result.stream) return result.stream;
  auto stream = std::make_shared<RequestStream>();
  stream->push(error_event(result.rejection, result.message));
  return stream;
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.running = n_running_.load();
  s.waiting = n_waiting_.load();
  s.in_flight = n_in_flight_.load();
  s.kv_blocks_total = backend_.kv_blocks();
  s.kv_blocks_referenced = n_referenced_.load();
  s.kv_blocks_cached = n_cached_.load();
  s.kv_cache_usage = s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_referenced) / s.kv_blocks_total : 0.0;
  s.preemptions_total = preemptions_pub_.load();
  s.prefix_cache_queries_tokens = cache_queries_pub_.load();
  s.prefix_cache_hits_tokens = cache_hits_pub_.load();
  s.prefill_computed_tokens = prefill_pub_.load();
  s.forward_seconds_total = forward_s_pub_.load();
  s.output_seconds_total = output_s_pub_.load();
  s.steps_total = steps_pub_.load();
  s.mask_wait_seconds_total = mask_wait_s_pub_.load();
  s.mask_steps_total = mask_steps_pub_.load();
  s.mask_wait_max_seconds = mask_wait_max_s_pub_.load();
  s.spec_draft_tokens_total = spec_draft_pub_.load();
  s.spec_accepted_tokens_total = spec_accepted_pub_.load();
  s.spec_propose_seconds_total = spec_propose_s_pub_.load();
  s.spec_propose_steps_total = spec_propose_steps_pub_.load();
  return s;
}

void Engine::UnseenCounters::add(int64_t sign, int64_t prompt, int64_t max) {
  sequences.fetch_add(sign);
  prompt_tokens.fetch_add(sign * prompt);
  max_tokens.fetch_add(sign * max);
}

UnseenRequests Engine::UnseenCounters::load() const {
  return {std::max<int64_t>(sequences.load(), 0), std::max<int64_t>(prompt_tokens.load(), 0),
          std::max<int64_t>(max_tokens.load(), 0)};
}

LoadSnapshot Engine::load_snapshot() const {
  std::shared_ptr<const LoadSnapshot> published;
  LoadSnapshot s;
  // incoming before taken: the engine adds a request to taken before it leaves incoming, so
  // reading in this order counts a request twice at worst, never not at all.
  const UnseenRequests incoming = unseen_incoming_.load();
  {
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    published = snapshot_;
    s.taken = unseen_taken_.load();  // consistent with the snapshot: cleared when it is replaced
  }
  if (published) {
    const UnseenRequests taken = s.taken;
    s = *published;
    s.taken = taken;
  }
  s.incoming = incoming;
  s.step_in_progress = s.taken.sequences > 0 || !s.running.empty() || !s.waiting.empty();
  if (s.step_in_progress) {
    const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
    s.step_age_s = std::max<int64_t>(now_ns - step_start_ns_.load(), 0) * 1e-9;
  }
  return s;
}

void Engine::publish_load() {
  auto s = std::make_shared<LoadSnapshot>();
  s->max_num_seqs = options_.max_num_seqs;
  s->max_batched_tokens = options_.max_batched_tokens;
  const auto pending = [](const SchedSequence* seq, int64_t prefill_tokens) {
    const auto& e = static_cast<const EngineSequence&>(*seq);
    return PendingSequence{seq->priority, seq->n_preemptions > 0, prefill_tokens, e.request.max_tokens, e.n_output()};
  };
  // A running sequence with one token left decodes it (scheduler.h); more left: still prefilling.
  for (const SchedSequence* seq : scheduler_.running()) {
    s->running.push_back(pending(seq, seq->n_remaining() >= 2 ? seq->n_remaining() : 0));
  }
  for (const SchedSequence* seq : scheduler_.waiting()) {
    s->waiting.push_back(pending(seq, static_cast<int64_t>(seq->tokens.size())));
  }
  s->prefill_chunk.assign(static_cast<size_t>(options_.max_num_seqs) + 1, options_.max_batched_tokens);
  for (int64_t n = 1; n <= options_.max_num_seqs; ++n) s->prefill_chunk[static_cast<size_t>(n)] = prefill_budget_.tokens_with_decode(n);
  s->costs = step_costs_;
  s->prefix_hit_ratio = cache_queries_ > 0 ? static_cast<double>(cache_hits_) / static_cast<double>(cache_queries_) : 0.0;
  s->output_ratio = output_ratio_ >= 0 ? output_ratio_ : 1.0;
  s->output_samples.assign(output_window_.begin(), output_window_.end());
  std::sort(s->output_samples.begin(), s->output_samples.end());
  s->draft_tokens_per_decode = spec_drafts_per_decode_;
  s->tokens_per_decode = spec_tokens_per_decode_;
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(snapshot_mutex_);
  snapshot_ = std::move(s);
  // What was taken for the step just ended is in this snapshot now.
  unseen_taken_.sequences.store(0);
  unseen_taken_.prompt_tokens.store(0);
  unseen_taken_.max_tokens.store(0);
  step_start_ns_.store(now_ns);  // the next step begins now if there is work
}

void Engine::publish_stats() {
  publish_load();
  n_referenced_.store(blocks_.n_referenced());
  n_cached_.store(blocks_.n_cached_unreferenced());
  preemptions_pub_.store(preemptions_);
  cache_queries_pub_.store(cache_queries_);
  cache_hits_pub_.store(cache_hits_);
  prefill_pub_.store(prefill_computed_);
  forward_s_pub_.store(forward_s_);
  output_s_pub_.store(output_s_);
  steps_pub_.store(steps_);
  mask_wait_s_pub_.store(mask_wait_s_);
  mask_wait_max_s_pub_.store(mask_wait_max_s_);
  mask_steps_pub_.store(mask_steps_);
  spec_draft_pub_.store(spec_draft_);
  spec_accepted_pub_.store(spec_accepted_);
  spec_propose_s_pub_.store(spec_propose_s_);
  spec_propose_steps_pub_.store(spec_propose_steps_);
  // Last: a reader that sees no running sequence also sees the totals of the step that ended them.
  n_running_.store(static_cast<int64_t>(scheduler_.running().size()));
}

// Releases the sequence's blocks and takes it out of the scheduler; the final event follows.
void Engine::retire(EngineSequence& seq) {
  const bool was_waiting = std::find(scheduler_.waiting().begin(), scheduler_.waiting().end(), &seq) !=
                           scheduler_.waiting().end();
  scheduler_.remove(&seq);
  if (proposer_) proposer_->release(seq.seq_id);  // a draft model's KV of the sequence
  if (was_waiting) n_waiting_.fetch_sub(1);
  seq.finished = true;
  n_in_flight_.fetch_sub(1);
  // The block gauges follow at once (the rest at the end of the step): a client that has seen its
  // request end must not read the freed blocks as still in use from /stats, /metrics or the
  // degradation check (a stale count let a request that arrived right after be judged by it).
  n_referenced_.store(blocks_.n_referenced());
  n_cached_.store(blocks_.n_cached_unreferenced());
}

void Engine::finish(EngineSequence& seq, const std::string& reason, const std::string& stop_cause) {
  EngineEvent event;
  event.kind = EngineEvent::Kind::kFinished;
  // Text held back by the decoder (incomplete UTF-8) or the stop matcher (a possible stop-string
  // prefix) can no longer grow: release it, unless it completes a stop string after all.
  const StopMatcher::Result tail = seq.stop.push(seq.decoder.flush());
  event.text = tail.text + (tail.stopped ? std::string() : seq.stop.flush());
  event.finish_reason = tail.stopped ? "stop" : reason;
  event.stop_cause = tail.stopped ? "stop_string" : stop_cause;
  event.prompt_tokens = seq.prompt_tokens();
  event.completion_tokens = seq.n_output();
  event.cached_tokens = std::max<int64_t>(seq.n_cached_prompt_tokens, 0);
  event.prefill_computed_tokens = seq.n_prefill_computed;
  event.preemptions = seq.n_preemptions;
  if (event.finish_reason == "stop" || event.finish_reason == "length") {
    // Expected output length for TTFT prediction (ttft_predictor.h): completion / max_tokens,
    // averaged with weight 1/8 on the newest finished sequence (single outputs vary a lot).
    const double ratio = std::clamp(static_cast<double>(seq.n_output()) / static_cast<double>(std::max<int64_t>(seq.request.max_tokens, 1)), 0.0, 1.0);
    output_ratio_ = output_ratio_ < 0 ? ratio : 0.875 * output_ratio_ + 0.125 * ratio;
    output_window_.push_back(ratio);
    if (output_window_.size() > kOutputWindow) output_window_.pop_front();
  }
  event.spec_draft_tokens = seq.n_spec_draft;
  event.spec_accepted_tokens = seq.n_spec_accepted;
  // Free the blocks before telling the client: once it sees the end, the KV is back in the pool.
  retire(seq);
  seq.stream->push(std::move(event));
}

void Engine::fail(EngineSequence& seq, EngineErrorCode code, const std::string& message) {
  EngineEvent event = error_event(code, message);
  event.prompt_tokens = seq.prompt_tokens();
  event.completion_tokens = seq.n_output();
  event.cached_tokens = std::max<int64_t>(seq.n_cached_prompt_tokens, 0);
  event.prefill_computed_tokens = seq.n_prefill_computed;
  event.preemptions = seq.n_preemptions;
  event.spec_draft_tokens = seq.n_spec_draft;
  event.spec_accepted_tokens = seq.n_spec_accepted;
  retire(seq);
  seq.stream->push(std::move(event));
}

void Engine::loop() {
  if (options_.thread_nice > 0) lower_thread_priority(options_.thread_nice);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (sequences_.empty()) {
        cv_.wait(lock, [this] { return stop_ || !incoming_.empty(); });
      }
      if (stop_) break;
      while (!incoming_.empty()) {
        const EngineSequence& seq = *incoming_.front();
        unseen_taken_.add(1, seq.n_prompt, seq.request.max_tokens);  // before leaving incoming: never in neither
        unseen_incoming_.add(-1, seq.n_prompt, seq.request.max_tokens);
        scheduler_.add(incoming_.front().get());
        sequences_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
    }
    step_start_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count());
    drop_expired_and_cancelled();
    try {
      step();
    } catch (const std::exception& e) {
      // A failed step fails the sequences in it, never the process.
      std::vector<SchedSequence*> running = scheduler_.running();
      for (SchedSequence* s : running) {
        fail(static_cast<EngineSequence&>(*s), EngineErrorCode::kInternal, std::string("engine step failed: ") + e.what());
      }
    }
    std::erase_if(sequences_, [](const auto& s) { return s->finished; });
    publish_stats();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& seq : incoming_) {
    scheduler_.add(seq.get());
    sequences_.push_back(std::move(seq));
  }
  incoming_.clear();
  // Cut by the stop, not finished: an error (503) rather than a finish_reason no API defines, so
  // that an OpenAI or Anthropic client retries it (on another replica) instead of taking a partial
  // reply for a whole one.
  for (auto& seq : sequences_) {
    fail(*seq, EngineErrorCode::kAborted,
         "the server shut down before this generation finished (" + std::to_string(seq->n_output()) +
             " tokens generated); retry the request");
  }
  sequences_.clear();
  publish_stats();
}

// The queue-wait limit (kQueueTimeout) is not checked here but in step(), after schedule(): a
// request is turned away only when the scheduler could not admit it.
void Engine::drop_expired_and_cancelled() {
  const auto now = SteadyClock::now();
  for (auto& seq : sequences_) {
    if (seq->finished) continue;
    if (seq->stream->cancelled()) {
      finish(*seq, "cancelled", "cancelled");
    } else if (now >= seq->deadline) {
      fail(*seq, EngineErrorCode::kTimeout,
           "request timed out after " + std::to_string(seq->request.timeout_s) + " s (timeout)");
    }
  }
}

}  // namespace qs
