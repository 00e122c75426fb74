// One engine step: build the batch, run the forward pass, sample and emit (see engine.h).
#include <algorithm>
#include <chrono>
#include <exception>
#include <span>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/output_guard.h"
#include "engine/sequence.h"

namespace qs {

bool Engine::token_is_blank(int32_t token) {
  if (token < 0 || token >= tokenizer_.vocab_size()) return false;
  int8_t& known = blank_token_[static_cast<size_t>(token)];
  if (known < 0) {
    const int32_t ids[1] = {token};
    known = is_blank_or_punct(tokenizer_.decode(ids, false)) ? 1 : 0;
  }
  return known == 1;
}

void Engine::emit_token(EngineSequence& seq, const StepOutput& out, int32_t row) {
  EngineEvent event;
  const int32_t token = out.sampled[row];
  if (!seq.greedy()) ++seq.sampling.draws;
  seq.tokens.push_back(token);
  event.token_ids.push_back(token);
  if (seq.request.top_logprobs >= 0) {
    std::vector<std::pair<int32_t, float>> top;
    top.reserve(static_cast<size_t>(out.top_len[row]));
    for (int32_t i = 0; i < out.top_len[row]; ++i) {
      const TopLogprob& t = out.top[static_cast<size_t>(out.top_begin[row] + i)];
      top.emplace_back(t.token, t.logprob);
    }
    event.logprobs.push_back({token, out.sampled_logprob[row], std::move(top)});
  }
  event.prompt_tokens = seq.prompt_tokens();
  event.completion_tokens = seq.n_output();
  const auto& stops = seq.request.stop_token_ids;
  bool is_stop_token = std::find(stops.begin(), stops.end(), token) != stops.end();
  if (seq.matcher) {
    // The mask allowed only tokens the grammar accepts; a refusal means a backend ignored it.
    bool accepted = false;
    try {
      accepted = seq.matcher->accept_token(token);
    } catch (const Error& e) {  // the grammar's live-parse limit: this request fails alone
      fail(seq, EngineErrorCode::kGrammar, e.what());
      return;
    }
    if (!accepted) {
      fail(seq, EngineErrorCode::kInternal, "structured output: sampled token " + std::to_string(token) +
                                                " is not allowed by the grammar");
      return;
    }
    if (seq.matcher->is_terminated()) is_stop_token = true;
  }
  StopMatcher::Result text;
  // Ids past the tokenizer's vocabulary (the embedding's padding rows, e.g. 151669..151935 in
  // Qwen3) have no text.
  const bool has_text = !is_stop_token && token < tokenizer_.vocab_size();
  // min_tokens: no stop string ends the output before it has min_tokens tokens (vLLM's rule).
  if (has_text) text = seq.stop.push(seq.decoder.feed(token), seq.n_output() >= seq.request.min_tokens);
  event.text = std::move(text.text);
  seq.stream->push(std::move(event));
  const std::string_view degenerate = is_stop_token ? std::string_view() : seq.guard.push(token, token_is_blank(token));
  if (is_stop_token || text.stopped) {
    finish(seq, "stop", is_stop_token ? "stop_token" : "stop_string");
  } else if (seq.n_output() >= seq.request.max_tokens) {
    finish(seq, "length", "max_tokens");
  } else if (!degenerate.empty() && seq.n_output() >= seq.request.min_tokens) {  // min_tokens holds the guard too
    finish(seq, "length", std::string(degenerate));
  }
}

bool Engine::step() {
  const auto step_begin = SteadyClock::now();
  propose_drafts();
  const auto& running = scheduler_.running();
  const auto n_decoding = std::count_if(running.begin(), running.end(), [](const SchedSequence* s) { return s->n_remaining() == 1; });
  scheduler_.set_prefill_limit_with_decode(prefill_budget_.tokens_with_decode(std::max<int64_t>(1, n_decoding)));
  const SchedulerStep plan = scheduler_.schedule();
  preemptions_ += static_cast<int64_t>(plan.preempted.size());
  // Publish running before waiting shrinks and before any event: a reader (e.g. the SIGTERM drain)
  // must never see a request in neither gauge while it is in flight.
  n_waiting_.fetch_add(static_cast<int64_t>(plan.preempted.size()));
  n_running_.store(static_cast<int64_t>(scheduler_.running().size()));
  for (SchedSequence* s : plan.admitted) {
    auto& seq = static_cast<EngineSequence&>(*s);
    n_waiting_.fetch_sub(1);
    if (seq.n_preemptions > 0) continue;  // readmission after preemption: already announced
    cache_queries_ += seq.n_prompt;
    cache_hits_ += seq.n_cached_prompt_tokens;
    EngineEvent admitted;
    admitted.queue_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - seq.request.arrival).count();
    admitted.prompt_tokens = seq.prompt_tokens();
    seq.stream->push(std::move(admitted));
  }
  // --max-queue-wait: a request that this step could not admit, never ran (a preempted one has
  // started) and has waited past the limit fails. Judged only here, after schedule(): a request
  // that reaches a free engine late (`arrival` is stamped by the caller, e.g. when the HTTP request
  // came in, before tokenization and grammar compilation; or the engine thread woke up late), or
  // whose slot frees as it expires, runs instead of being turned away as "overloaded".
  if (options_.max_queue_wait_s > 0) {
    const auto now = SteadyClock::now();
    const auto max_wait = std::chrono::duration<double>(options_.max_queue_wait_s);
    // A copy: fail() takes the sequence out of the waiting queue.
    const std::vector<SchedSequence*> waiting(scheduler_.waiting().begin(), scheduler_.waiting().end());
    for (SchedSequence* s : waiting) {
      auto& seq = static_cast<EngineSequence&>(*s);
      if (seq.admitted_once || now - seq.request.arrival <= max_wait) continue;
      fail(seq, EngineErrorCode::kQueueTimeout,
           "server overloaded: the request waited more than " + std::to_string(options_.max_queue_wait_s) +
               " s to start (--max-queue-wait); retry later");
    }
  }
  if (plan.chunks.empty()) return false;
  step_runner_.clear();
  struct RowOwner {
    EngineSequence* seq;
    int32_t row;      // its first output row
    int64_t n_draft;  // drafts verified after it (rows row + 1 .. row + n_draft)
  };
  std::vector<RowOwner> logits_owners;
  std::vector<RowOwner> constrained;  // sequences needing masks
  int64_t n_decode = 0;
  int64_t n_prefill = 0;
  int64_t n_draft = 0;  // verified draft tokens (priced like prefill tokens: they run as a chunk)
  for (const ScheduledChunk& c : plan.chunks) {
    auto* seq = static_cast<EngineSequence*>(c.seq);
    // A decode token is the newest sampled token (past the prompt); everything else is prefill
    // (prompts, and the recompute of preempted sequences).
    const bool is_decode = c.n - c.n_draft == 1 && c.first >= seq->n_prompt &&
                           c.first + 1 == static_cast<int64_t>(seq->tokens.size());
    if (is_decode) {
      n_decode += 1;
      n_draft += c.n_draft;
    } else {
      n_prefill += c.n;
    }
    StepSequence in;
    in.seq_id = seq->seq_id;
    in.tokens = seq->tokens;
    if (c.n_draft > 0) {  // the verify chunk: the last token, then the drafts
      verify_tokens_.assign(seq->tokens.begin(), seq->tokens.end());
      verify_tokens_.insert(verify_tokens_.end(), seq->draft_tokens.begin(), seq->draft_tokens.begin() + c.n_draft);
      in.tokens = verify_tokens_;
      const size_t q_size = static_cast<size_t>(c.n_draft) * static_cast<size_t>(backend_.vocab_rows());
      if (c.needs_logits && seq->draft_probs.size() >= q_size) in.draft_probs = {seq->draft_probs.data(), q_size};
    }
    in.n_prompt = seq->n_prompt;
    in.first = c.first;
    in.n = c.n;
    in.block_table = seq->block_table;
    in.n_logits = c.needs_logits ? static_cast<int32_t>(1 + c.n_draft) : 0;
    in.sampling = &seq->sampling;
    in.min_tokens = seq->request.min_tokens;
    in.stop_token_ids = seq->request.stop_token_ids;
    in.mask_later = c.needs_logits && seq->matcher != nullptr;
    const int32_t row = step_runner_.add(in);  // copies the tokens: verify_tokens_ may be reused
    if (c.needs_logits) logits_owners.push_back({seq, row, c.n_draft});
    if (in.mask_later) constrained.push_back({seq, row, c.n_draft});
    if (c.first < seq->n_prompt) prefill_computed_ += std::min(c.first + c.n, seq->n_prompt) - c.first;
  }
  // Masks are written between launch and wait (the backend reads them when it samples): the
  // workers start first, so they overlap the CPU backend's forward pass inside launch() too.
  // A mask that cannot be built (the grammar's mask work limit: constrained/grammar_compiler.h)
  // fails its own sequence after the step, never the batch.
  std::vector<std::string> mask_errors(constrained.size());
  if (!constrained.empty()) {
    mask_workers_.start(static_cast<int>(constrained.size()), [this, &constrained, &mask_errors](int i) {
      const RowOwner& o = constrained[static_cast<size_t>(i)];
      try {
        if (o.n_draft > 0) {
          fill_verify_masks(*o.seq, o.row, o.n_draft);
        } else {
          o.seq->matcher->fill_next_token_bitmask(step_runner_.mask_row(o.row).data());
        }
      } catch (const Error& e) {
        mask_errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  try {
    step_runner_.launch();
  } catch (...) {
    if (!constrained.empty()) mask_workers_.join();
    throw;
  }
  std::exception_ptr mask_error;  // the step is still waited for, so the backend is left idle
  if (!constrained.empty()) {
    const auto mask_wait = SteadyClock::now();
    try {
      mask_workers_.join();
    } catch (...) {
      mask_error = std::current_exception();
    }
    const double waited_s = std::chrono::duration<double>(SteadyClock::now() - mask_wait).count();
    mask_wait_s_ += waited_s;
    mask_wait_max_s_ = std::max(mask_wait_max_s_, waited_s);
    ++mask_steps_;
  }
  const StepOutput& out = step_runner_.wait();
  if (mask_error) std::rethrow_exception(mask_error);
  // The process's first step (the warm-up's) touches every weight page for the first time: ~100x
  // a later step of its size, so it is not learned from (here nor in step_costs_ below). Verified
  // draft tokens run in the same chunked forward as prefill tokens and are priced alike (here and
  // in step_costs_).
  if (steps_ > 0) prefill_budget_.record(n_decode, n_prefill + n_draft, step_runner_.last_forward_seconds());
  scheduler_.commit(plan);
  const auto output_start = SteadyClock::now();
  const int64_t accepted_before = spec_accepted_;
  for (size_t i = 0; i < constrained.size(); ++i) {
    if (!mask_errors[i].empty()) fail(*constrained[i].seq, EngineErrorCode::kGrammar, mask_errors[i]);
  }
  for (const RowOwner& o : logits_owners) {
    if (o.seq->finished) continue;  // failed above: its row was sampled under an unfinished mask
    if (o.n_draft > 0) {
      emit_verified(*o.seq, out, o.row, o.n_draft);
    } else {
      emit_token(*o.seq, out, o.row);
    }
  }
  const auto step_end = SteadyClock::now();
  forward_s_ += step_runner_.last_forward_seconds();
  output_s_ += std::chrono::duration<double>(step_end - output_start).count();
  // Step costs for TTFT prediction (step_costs.h): the step's whole wall time (planning, forward,
  // output processing: a first token reaches its client after all of it) against its logits rows
  // and other prefill tokens.
  if (steps_ > 0) {
    const auto logits_rows = static_cast<int64_t>(logits_owners.size());
    step_costs_.record(logits_rows, n_prefill - (logits_rows - n_decode) + n_draft,
                       std::chrono::duration<double>(step_end - step_begin).count());
  }
  if (n_decode > 0) {
    // Speculative decoding's step shape for TTFT prediction (LoadSnapshot::draft_tokens_per_decode,
    // tokens_per_decode): 0 and 1 without speculation.
    const double decodes = static_cast<double>(n_decode);
    spec_drafts_per_decode_ = 0.875 * spec_drafts_per_decode_ + 0.125 * static_cast<double>(n_draft) / decodes;
    spec_tokens_per_decode_ = 0.875 * spec_tokens_per_decode_ + 0.125 * (1.0 + static_cast<double>(spec_accepted_ - accepted_before) / decodes);
  }
  ++steps_;
  return true;
}

}  // namespace qs
