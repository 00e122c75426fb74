// TTFT prediction for SLO-aware admission (issue 12): replays the scheduler's coming steps on a
// read-only snapshot of the engine's load.
//
// The HTTP thread predicts a request's time to first token without waiting on the engine thread:
// Engine::load_snapshot() copies the snapshot the engine publishes after every step, plus the
// requests submitted since (and the caller adds those it is admitting itself).
//
// Model. The predictor runs the scheduler's policy (engine/scheduler.h) on token counts, step by
// step, until the request's first sequence has its first token; the prediction is the sum of the
// steps' costs (engine/step_costs.h), less the part of the step in progress already spent:
//   each step   n_dec = running sequences that decode (prompt done); prefill budget
//               b = max_batched_tokens - n_dec, capped at prefill_chunk[n_dec] when n_dec > 0 (the
//               prefill budget's cap the engine sets before each step, engine/prefill_budget.h);
//               b goes to the running sequences still prefilling, oldest first, then waiting
//               sequences are admitted in queue order while b > 0 and a slot is free
//               (max_num_seqs), each taking min(b, its prefill tokens);
//   its cost    step_s(L, c): L = n_dec + prefill chunks that end their prompt (they yield
//               logits), c = the other prefill tokens;
//   after it    a chunk that ends a prompt yields the sequence's first token, a decode one more;
//               a sequence ends after its expected output and frees its slot for the next step.
//   TTFT        = sum of the costs up to the step that ends the request's prompt (its first
//               choice's), minus min(age, cost of step 1) when a step is in progress (step 1 is
//               then that step: the request and the requests submitted after it started join
//               from step 2; those already taken into the scheduler join in step 1).
//   speculative decoding (--spec-ngram): each decode also verifies d = draft_tokens_per_decode
//               drafts on average (the engine's moving average over steps), so a step with n_dec
//               decodes has llround(n_dec x d) more tokens without logits (c above: drafts run in
//               the same chunked forward as prefill tokens and StepCosts learns them as such),
//               taken from the token budget before prefill; a decode gains g = tokens_per_decode
//               (1 + accepted drafts, averaged) tokens instead of one, so a sequence with m tokens
//               left decodes ceil(m / g) more steps. The first token after a prompt is one token.
// Queue: the scheduler's waiting queue (preempted sequences at the front, then by priority, FIFO
// within a class), then the requests submitted but not yet in the snapshot (priority unknown:
// counted ahead), then the request's own n choices. Waiting sequences of a later class than the
// request's compete in the step in progress (the request is not queued yet) and after it wait
// behind the request (taking only what the budget of its last prefill step leaves).
// Estimates, documented instead of looked up:
//   prefill of a queued prompt = max(1, round(tokens x (1 - prefix_hit_ratio))) (the hit ratio so
//               far; the engine's block hashes are not thread-safe to read), exact for running
//               sequences (their match was made at admission);
//   output      of a sequence with `generated` tokens so far and `max_tokens`: with fewer than
//               kMinOutputSamples finished sequences, min(max_tokens, max(generated + 1,
//               ceil(output_ratio x max_tokens))), the ratio being the learned mean
//               completion_tokens / max_tokens (1 until one finished: max_tokens is an upper
//               bound). With more, a draw from the finished sequences' ratios (output_samples)
//               conditioned on outliving `generated`: L = clamp(ceil(r x max_tokens), 1,
//               max_tokens) over the samples with L > generated (none: generated + 1).
//               The prediction is then the median of kOutputReplays replays; in replay i the
//               j-th sequence takes the quantile u = frac((i + 1/2) / kOutputReplays + j x phi)
//               (phi = 0.618..., the golden ratio's fraction) of its conditional distribution, so
//               each sequence meets every stratum once and different sequences are decorrelated.
//               Why: output lengths are far from their mean (a guard or a stop token ends most
//               outputs early, a few run to max_tokens), and a request waiting for a slot waits
//               for the *first* of the running sequences to end, whose expectation is well below
//               the smallest of their expected ends, and past the mean the mean rule has a
//               sequence end at its next token. Measured (small model, bench/slo_sweep.sh at 0.5x-3x
//               capacity, one run each, AMD EPYC 2 vCPUs): relative error P10 -0.30..-0.39 with the
//               mean rule, -0.09..-0.22 with the draws; P90 +0.35..+0.51 and +0.40..+0.77 (the
//               TTFT of a prompt chunked next to decodes depends on whether they end first:
//               bimodal, whatever the point estimate);
//   KV blocks   are assumed to suffice (no preemption is predicted).
// Steps whose decodes alone fill every slot are taken in one stride (k steps of the same cost,
// k = the fewest decodes left), so a prediction costs O(admissions + prefill chunks) work.
// Until the engine measured a decode step and a prefill chunk the prediction is 0 (admit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/step_costs.h"

namespace qs {

/// One sequence the engine holds, as the predictor sees it.
struct PendingSequence {
  int32_t priority = 0;
  bool preempted = false;      // waiting after a preemption: at the queue front whatever its class
  int64_t prefill_tokens = 0;  // running: tokens still to compute before it decodes (0: decoding);
                               // waiting: all its tokens (prompt + generated), before prefix hits
  int64_t max_tokens = 0;      // its max_tokens
  int64_t generated = 0;       // completion tokens so far
};

/// Requests counted only in sums (submitted since the snapshot, or being admitted): `sequences`
/// sequences sharing `prompt_tokens` and `max_tokens` evenly.
struct UnseenRequests {
  int64_t sequences = 0;
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;
};

struct LoadSnapshot {
  int64_t max_num_seqs = 1;
  int64_t max_batched_tokens = 1;
  std::vector<PendingSequence> running;  // the scheduler's running list (admission order)
  std::vector<PendingSequence> waiting;  // the scheduler's waiting queue, front first
  std::vector<int64_t> prefill_chunk;    // [max_num_seqs + 1]: prefill tokens allowed next to n
                                         // decodes (index n >= 1); missing: max_batched_tokens
  StepCosts costs;
  double prefix_hit_ratio = 0;  // cached / looked-up prompt tokens at first admission so far, 0..1
  double output_ratio = 1;      // learned completion_tokens / max_tokens of finished sequences, 0..1
  // completion_tokens / max_tokens (0..1) of the last finished sequences, ascending; used instead of
  // output_ratio from kMinOutputSamples on (see the file comment).
  std::vector<double> output_samples;
  // Speculative decoding (--spec-ngram): per decoding sequence and step, the mean draft tokens
  // verified (priced like prefill tokens of the step) and the mean tokens gained (1 + accepted
  // drafts). Without speculation 0 and 1.
  double draft_tokens_per_decode = 0;
  double tokens_per_decode = 1;
  bool step_in_progress = false;  // the engine is running step 1 (see the file comment)
  double step_age_s = 0;          // seconds since that step began
  UnseenRequests taken;     // moved into the scheduler for the step in progress (join in step 1)
  UnseenRequests incoming;  // submitted, not yet taken by the engine (join from step 2)
};

/// Finished sequences needed before their output lengths are drawn from (else the mean rule).
inline constexpr size_t kMinOutputSamples = 8;
/// Replays whose median TTFT is the prediction when output lengths are drawn (odd: a true median).
inline constexpr int kOutputReplays = 15;

/// A prediction and its parts (seconds from now; steps of the replay), for the request log.
struct TtftPrediction {
  double ttft_s = 0;      // until the first token of the request's first choice
  double queue_s = 0;     // until the step that admits that choice begins (the rest is its prefill)
  int64_t steps = 0;      // steps replayed (a stride of k identical steps counts k)
  int64_t decode_only_steps = 0;  // of those, steps without prefill tokens
  int64_t prefill_tokens = 0;     // prefill tokens replayed (the request's own included)
  int64_t ahead = 0;      // sequences ahead of the request when it arrives (running + queued)
};

/// Predicted seconds from now until the first token of a request with `prompt_tokens` prompt
/// tokens, `n_choices` sequences and `priority`; see the file comment. Never negative.
TtftPrediction predict_ttft(const LoadSnapshot& load, int64_t prompt_tokens, int32_t priority, int64_t n_choices = 1);
inline double predict_ttft_s(const LoadSnapshot& load, int64_t prompt_tokens, int32_t priority, int64_t n_choices = 1) {
  return predict_ttft(load, prompt_tokens, priority, n_choices).ttft_s;
}

}  // namespace qs
