// TTFT prediction for SLO-aware admission (issue 12), from a read-only snapshot of the engine's
// load that the engine publishes after every step.
//
// The HTTP thread predicts a request's time to first token without waiting on the engine thread:
// Engine::load_snapshot() copies the snapshot under a mutex the engine holds only to replace it.
// The model (all times in seconds, token counts are prompt tokens still to be computed):
//   work W    = prefill tokens of running sequences still to compute + waiting sequences of the
//               request's priority or a sooner one + submitted but not yet scheduled (any
//               priority) + the request's own uncached prompt tokens,
//   own uncached = prompt tokens x (1 - the prefix-cache hit ratio observed so far): a documented
//               estimate instead of a lookup in the engine's block hashes (not thread-safe);
//   prefill   = W x prefill_token_s plus, while decodes run, ceil(W / chunk) steps of
//               decode_step_s(n_running) (chunk: the learned prefill tokens per mixed step);
//   slot wait = when the sequences ahead of it fill every free slot (--max-num-seqs), the k-th
//               smallest remaining max_tokens among the running sequences (k = how many must end
//               first) x decode_step_s (an upper bound: stop tokens end sequences earlier), after
//               which its own prefill still runs;
//   TTFT      = max(prefill, slot wait + own prefill).
// prefill_token_s is learned by the engine from steps with at least 16 prefill tokens (a step's
// time less its decode part, per prefill token), not the prefill budget's figure: that one is
// bootstrapped from any prefill step, and the warm-up's one-token step (first touch of the
// weights) would make it ~100x too high. Until such a step was measured the prediction is 0 and
// every request is admitted.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace qs {

struct LoadSnapshot {
  int64_t max_num_seqs = 1;
  int64_t running = 0;
  int64_t running_prefill_tokens = 0;            // prompt tokens of running sequences not yet computed
  std::vector<std::pair<int32_t, int64_t>> waiting_tokens_by_priority;  // (priority, tokens), ascending priority
  std::vector<std::pair<int32_t, int64_t>> waiting_count_by_priority;   // (priority, sequences)
  int64_t incoming_sequences = 0;                // submitted, not yet seen by the scheduler
  int64_t incoming_tokens = 0;
  std::vector<int64_t> running_remaining_tokens;  // max_tokens - generated of each running sequence, ascending
  double decode_step_s = 0;                      // learned decode-only step with `running` decodes
  double prefill_token_s = 0;                    // learned seconds per prefill token
  int64_t prefill_tokens_per_step = 1;           // learned prefill chunk next to `running` decodes
  double prefix_hit_ratio = 0;                   // cached / looked-up prompt tokens so far, 0..1
};

/// Predicted seconds from now until the first token of a request with `prompt_tokens` prompt
/// tokens (times `n_choices` sequences) and `priority`; see the file comment. Never negative.
double predict_ttft_s(const LoadSnapshot& load, int64_t prompt_tokens, int32_t priority, int64_t n_choices = 1);

}  // namespace qs
