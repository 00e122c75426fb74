// Engine-thread state of one generation: its request, KV bookkeeping (SchedSequence: tokens,
// computed count, block table), how its tokens are sampled (SequenceSampling, run by the
// backend), and its output pipeline (incremental detokenizer -> stop-string matcher -> output
// guard -> RequestStream).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "constrained/grammar_matcher.h"
#include "engine/draft_length.h"
#include "engine/output_guard.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/step_runner.h"
#include "engine/stop_matcher.h"
#include "sampling/sampling_params.h"
#include "tokenizer/incremental_decoder.h"

namespace qs {

struct EngineSequence : SchedSequence {
  /// Throws qs::Error when the sampling parameters are invalid for `vocab` tokens. `id` is the
  /// engine's stable id of the sequence.
  EngineSequence(EngineRequest r, const Tokenizer& tokenizer, int32_t vocab, OutputGuardOptions guard_options, uint64_t id)
      : request(std::move(r)),
        seq_id(id),
        stream(std::make_shared<RequestStream>()),
        decoder(tokenizer, request.skip_special_tokens),
        stop(request.stop_strings),
        guard(request.ignore_eos ? OutputGuardOptions{.enabled = false} : guard_options) {
    validate(request.sampling, vocab);
    sampling.params = request.sampling;
    sampling.seed = request.sampling.seed.has_value() ? *request.sampling.seed : random_seed();
    sampling.n_logprobs = request.top_logprobs;
    if (request.grammar) matcher = std::make_unique<constrained::GrammarMatcher>(request.grammar, 16);
    tokens = request.prompt_ids;
    n_prompt = static_cast<int64_t>(tokens.size());
    priority = request.priority;
    if (request.timeout_s > 0) {
      deadline = request.arrival + std::chrono::duration_cast<SteadyClock::duration>(
                                       std::chrono::duration<double>(request.timeout_s));
    }
  }

  int64_t prompt_tokens() const { return n_prompt; }
  int64_t n_output() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  std::span<const int32_t> prompt_ids() const { return {tokens.data(), static_cast<size_t>(n_prompt)}; }
  std::span<const int32_t> output_ids() const {
    return {tokens.data() + n_prompt, static_cast<size_t>(n_output())};
  }

  /// True when sampling is a plain argmax (no RNG draw per token).
  bool greedy() const { return sampling.params.temperature == 0.0f || sampling.params.top_k == 1; }

  EngineRequest request;
  uint64_t seq_id;
  std::shared_ptr<RequestStream> stream;
  SequenceSampling sampling;
  IncrementalDecoder decoder;
  StopMatcher stop;
  OutputGuard guard;
  SteadyClock::time_point deadline = SteadyClock::time_point::max();
  bool finished = false;
  // Structured output (request.grammar): advanced once per sampled token in emit_token, never by
  // a recompute after preemption (the recomputed tokens were accepted when first sampled).
  std::unique_ptr<constrained::GrammarMatcher> matcher;
  // Speculative decoding: draft tokens verified for this sequence, and of those accepted.
  int64_t n_spec_draft = 0;
  int64_t n_spec_accepted = 0;
  // --spec-adaptive: this sequence's acceptance rate so far, and decode steps in a row it was given
  // fewer drafts than it could have (engine/draft_length.h's probe).
  AcceptanceEstimate acceptance;
  int32_t steps_below_max = 0;
  // Sampled drafts of a draft model: [draft_tokens.size() as proposed, vocab_rows] f32, row j the
  // distribution q draft j was drawn from (DraftRequest::probs); empty for point-mass drafts. The
  // scheduler may trim draft_tokens: the first n_draft rows go with the verify chunk.
  std::vector<float> draft_probs;
};

}  // namespace qs
