// Speculative decoding in the serving engine (see engine.h, engine/draft_proposer.h: n-gram lookup
// or a draft model, and sampling/rejection_sampler.h): drafts are proposed for every decoding
// sequence (one proposer call per step) before the scheduler
// plans the step; a decode chunk then carries the last sampled token and k drafts (k + 1 query
// tokens, k + 1 logits rows, like a small chunked prefill) through the normal StepBatch path; the
// engine accepts drafts while the token sampled at a row equals the draft there (the one-hot
// rejection step for point-mass drafts; for a draft model's sampled drafts the backend ran
// Leviathan et al.'s step against q at each row, whose output equals the draft iff accepted) and emits the accepted drafts and the token after them one by one, so stop
// tokens, stop strings, max_tokens and the output guard end a sequence at the right token. With
// SpecDecodeOptions::adaptive each sequence's k is chosen per step (engine/draft_length.h) from its
// acceptance so far and step_costs_.
#include <algorithm>
#include <chrono>
#include <span>

#include "engine/engine.h"
#include "engine/sequence.h"
#include "sampling/rejection_sampler.h"

namespace qs {

void Engine::propose_drafts() {
  if (!proposer_) return;
  const int64_t context = context_tokens();
  draft_requests_.clear();
  decoding_.clear();
  for (SchedSequence* s : scheduler_.running()) {
    auto& seq = static_cast<EngineSequence&>(*s);
    seq.draft_tokens.clear();
    seq.draft_probs.clear();
    if (seq.n_remaining() != 1 || seq.n_output() < 1) continue;  // not decoding
    const auto n_tokens = static_cast<int64_t>(seq.tokens.size());
    // Tokens the sequence may still gain after this step's sampled one, and room in the context.
    const int64_t room = std::min<int64_t>(seq.request.max_tokens - seq.n_output() - 1, context - n_tokens);
    decoding_.push_back({&seq, options_.spec.drafts_for_room(room)});
  }
  if (options_.spec.adaptive && !decoding_.empty()) choose_adaptive_drafts();
  for (const DecodingSequence& d : decoding_) {
    if (d.k < 1) continue;
    EngineSequence& seq = *d.seq;
    draft_requests_.push_back({seq.seq_id, seq.tokens, d.k, &seq.draft_tokens, seq.n_prompt, &seq.sampling, &seq.draft_probs});
  }
  if (draft_requests_.empty()) return;
  const auto start = SteadyClock::now();
  proposer_->propose(draft_requests_);
  spec_propose_s_ += std::chrono::duration<double>(SteadyClock::now() - start).count();
  ++spec_propose_steps_;
}

void Engine::choose_adaptive_drafts() {
  // engine/draft_length.h: k per sequence from its acceptance estimate and the learned cost of a
  // step of these decode rows verifying m drafts (step_costs.h prices verified drafts as prefill
  // tokens; a step is timed from before propose_drafts(), so a draft model's passes are in it).
  const size_t n = decoding_.size();
  adaptive_a_.resize(n);
  adaptive_k_max_.resize(n);
  adaptive_below_.resize(n);
  adaptive_k_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    adaptive_a_[i] = decoding_[i].seq->acceptance.rate();
    adaptive_k_max_[i] = decoding_[i].k;
    adaptive_below_[i] = decoding_[i].seq->steps_below_max;
  }
  adaptive_draft_lengths(step_costs_, adaptive_a_, adaptive_k_max_, adaptive_below_, adaptive_k_);
  for (size_t i = 0; i < n; ++i) {
    decoding_[i].k = adaptive_k_[i];
    decoding_[i].seq->steps_below_max = adaptive_below_[i];
  }
}

void Engine::fill_verify_masks(EngineSequence& seq, int32_t row, int64_t n_draft) {
  // Row j's mask is the grammar state after drafts 0..j-1: advance the matcher over the drafts,
  // then roll it back (emit_token advances it over the tokens actually emitted). A draft the
  // grammar refuses is masked out at its own row, so it is rejected there and the rows after it
  // are never used (left all-allowed).
  constrained::GrammarMatcher& matcher = *seq.matcher;
  size_t advanced = 0;
  try {
    for (int64_t j = 0; j <= n_draft; ++j) {
      matcher.fill_next_token_bitmask(step_runner_.mask_row(row + static_cast<int32_t>(j)).data());
      if (j == n_draft || !matcher.accept_token(seq.draft_tokens[static_cast<size_t>(j)])) break;
      ++advanced;
      if (matcher.is_terminated()) break;  // a stop draft: the sequence ends there if accepted
    }
  } catch (...) {
    matcher.rollback(advanced);
    throw;
  }
  matcher.rollback(advanced);
}

void Engine::emit_verified(EngineSequence& seq, const StepOutput& out, int32_t row, int64_t n_draft) {
  const std::span<const int32_t> drafts(seq.draft_tokens.data(), static_cast<size_t>(n_draft));
  const std::span<const int32_t> sampled(out.sampled.data() + row, static_cast<size_t>(n_draft + 1));
  // Counted as the rejection step decided (as vLLM counts them), before emitting: a stop inside
  // the accepted drafts does not lower the rate, and the final event (sent from inside
  // emit_token) reports them.
  const int32_t accepted = count_accepted(drafts, sampled);
  seq.acceptance.record(n_draft, accepted);
  seq.n_spec_draft += n_draft;
  seq.n_spec_accepted += accepted;
  spec_draft_ += n_draft;
  spec_accepted_ += accepted;
  // The accepted drafts, then the token sampled after them; finishing the sequence (stop token,
  // stop string, max_tokens, guard) stops there and releases its blocks and drafts.
  for (int32_t j = 0; j <= accepted; ++j) {
    emit_token(seq, out, row + j);
    if (seq.finished) return;
  }
  // The accepted drafts' KV is now part of the sequence.
  scheduler_.accept_drafts(seq, accepted);
}

}  // namespace qs
