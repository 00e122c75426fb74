// Chunked-prefill budget that keeps inter-token latency (ITL) flat while prompts prefill.
//
// A step that carries prefill chunks next to running decodes makes every running stream wait for
// the whole step, so the prefill tokens of such a step are capped by time: the step may take at
// most (1 + slack) times a decode-only step with the same number of decodes. The controller
// learns the costs online from the steps the engine runs (exponential moving averages, weight 1/4
// on the newest sample):
//   decode_step_s(n)  wall seconds of a step with n decode tokens and no prefill, one average per
//                     n (on a CPU an 8-sequence step costs ~3x a 1-sequence one, so a single
//                     average would let chunks swing with the batch composition),
//   prefill_token_s   wall seconds per prefill token: a mixed step's excess over decode_step_s(n)
//                     divided by its prefill tokens; until a mixed step is measured, a
//                     prefill-only step's time divided by its tokens (large chunks amortize more,
//                     so that figure is kept apart and only bootstraps the cap),
// and allows floor(slack * decode_step_s(n) / prefill_token_s) prefill tokens, at least
// `min_tokens` (so long prompts always progress) and at most --max-batched-tokens. Steps without
// decodes are not capped: nobody is streaming. This is the "stall-free batching" of Sarathi-Serve
// (Agrawal et al., OSDI 2024) with the chunk size derived from measured step times instead of a
// fixed token count. On a GPU a decode step is memory-bound and a 512-token chunk costs about the
// same, so the cap rarely binds; on a compute-bound CPU a prefill token costs about as much as a
// decode token and the cap decides the ITL tail.
#pragma once

#include <cstdint>
#include <vector>

namespace qs {

class PrefillBudget {
 public:
  /// `slack` >= 0 (0 disables the cap: every step may use `max_batched_tokens`);
  /// `min_tokens` >= 1 prefill tokens are always allowed; `max_decode` >= 1 is the most decode
  /// tokens a step can carry (--max-num-seqs). Throws qs::Error on other values.
  PrefillBudget(double slack, int64_t max_batched_tokens, int64_t min_tokens, int64_t max_decode);

  /// Prefill tokens a step that also carries `n_decode` >= 1 decode tokens may add.
  int64_t tokens_with_decode(int64_t n_decode) const;

  /// Records one finished step: `n_decode` decode tokens, `n_prefill` prefill tokens, its wall
  /// time in seconds.
  void record(int64_t n_decode, int64_t n_prefill, double seconds);

  /// Estimated seconds of a decode-only step with `n_decode` decodes; 0 while nothing is
  /// measured. Unmeasured counts use the nearest measured count below (steps with fewer decodes
  /// are cheaper, so the estimate errs towards smaller chunks), else the nearest above scaled by
  /// n_decode / count (cost per decode falls with the batch, so that too is a lower bound).
  double decode_step_s(int64_t n_decode) const;
  /// Seconds per prefill token next to decodes (see the file comment); 0 while nothing is measured.
  double prefill_token_s() const { return prefill_token_s_ > 0 ? prefill_token_s_ : prefill_only_token_s_; }

 private:
  static void update(double& average, double sample);

  double slack_;
  int64_t max_tokens_;
  int64_t min_tokens_;
  std::vector<double> decode_step_s_;  // [max_decode + 1], index n_decode; 0: not measured yet
  double prefill_token_s_ = 0;         // from mixed steps; 0: not measured yet
  double prefill_only_token_s_ = 0;    // from prefill-only steps; 0: not measured yet
};

}  // namespace qs
