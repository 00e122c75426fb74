// Chunked-prefill budget that keeps inter-token latency (ITL) flat while prompts prefill.
//
// A step that carries prefill chunks next to running decodes makes every running stream wait for
// the whole step, so the prefill tokens of such a step are capped by time: the step may take at
// most (1 + slack) times a decode-only step with the same number of decodes. The controller
// learns the costs online from the steps the engine runs (times in seconds, sizes in tokens):
//   decode_step_s(n)  seconds of a step with n decode tokens and no prefill, one exponential
//                     moving average per n (weight 1/4 on the newest sample; on a CPU an
//                     8-sequence step costs ~3x a 1-sequence one, so a single average would let
//                     chunks swing with the batch composition); a sample is first clipped at
//                     twice the average of its n once one exists;
//   prefill_token_s   seconds per prefill token next to decodes, a ratio of averages over the
//                     last kWindow mixed steps (decodes and prefill):
//                       prefill_token_s = max(0, sum(t_i - decode_step_s(n_i)) / sum(p_i))
//                     with t_i the step's seconds, n_i its decodes and p_i its prefill tokens.
//                     The excess t_i - decode_step_s(n_i) is kept signed (a step faster than the
//                     decode average lowers the sum), and t_i is first clipped at twice the
//                     step's expected time decode_step_s(n_i) + p_i x prefill_token_s (a step
//                     descheduled for seconds on a shared machine counts as a slow step, not as
//                     a hundred). Until a mixed step is measured, a prefill-only step's seconds
//                     per token bootstrap the cost (an average of its own: large chunks amortize
//                     more, so that figure only starts the cap).
// The cap is floor(slack x decode_step_s(n) / prefill_token_s) prefill tokens, at most
// --max-batched-tokens and at least the floor F = `min_tokens` (--prefill-min-chunk). The floor is
// lowered only when an ITL limit I (--slo-itl-ms) is set, I > decode_step_s(n), and a chunk of F
// tokens would exceed it: then F' = max(1, floor((I - decode_step_s(n)) / prefill_token_s)) (the
// ITL target is attainable only with smaller chunks); when I <= decode_step_s(n) the target is
// lost anyway and F is kept so that prompts progress.
// Why this rule (the collapse it replaces): the previous rule averaged per-step ratios
// max(0, excess) / p_i with no floor above 1 token. On a loaded CPU a 1-token chunk's excess is
// noise of +-tens of ms around a true cost of ~1 ms; keeping only the positive part and dividing by
// 1 held the learned cost an order of magnitude high, the cap stayed at 1 token, and only 1-token
// chunks were ever measured again: a 264-token prompt needed ~264 steps (TTFT 10-250 s). Now the
// noise averages out in the sums, a large chunk weighs in proportion to its tokens, and the floor
// keeps every measured chunk at >= F tokens, so a wrong estimate is re-measured within kWindow
// mixed steps (its samples leave the window) instead of feeding on itself.
// Steps without decodes are not capped: nobody is streaming. This is the "stall-free batching"
// of Sarathi-Serve (Agrawal et al., OSDI 2024) with the chunk size derived from measured step
// times instead of a fixed token count. On a GPU a decode step is memory-bound and a 512-token
// chunk costs about the same, so the cap rarely binds; on a compute-bound CPU a prefill token
// costs about as much as a decode token and the cap decides the ITL tail.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace qs {

class PrefillBudget {
 public:
  static constexpr int kWindow = 16;  // mixed steps in prefill_token_s's sums

  /// `slack` >= 0 (0 disables the cap: every step may use `max_batched_tokens`);
  /// `min_tokens` >= 1: the floor F in tokens (see the file comment); `max_decode` >= 1 is the most
  /// decode tokens a step can carry (--max-num-seqs); `itl_limit_s` >= 0: the ITL limit I in
  /// seconds that may lower the floor (0: none). Throws qs::Error on other values.
  PrefillBudget(double slack, int64_t max_batched_tokens, int64_t min_tokens, int64_t max_decode,
                double itl_limit_s = 0);

  /// Prefill tokens a step that also carries `n_decode` >= 1 decode tokens may add.
  int64_t tokens_with_decode(int64_t n_decode) const;

  /// Records one finished step: `n_decode` decode tokens, `n_prefill` prefill tokens, its wall
  /// time in seconds. Non-positive or non-finite times are ignored.
  void record(int64_t n_decode, int64_t n_prefill, double seconds);

  /// Estimated seconds of a decode-only step with `n_decode` decodes; 0 while nothing is
  /// measured. Unmeasured counts use the nearest measured count below (steps with fewer decodes
  /// are cheaper, so the estimate errs towards smaller chunks), else the nearest above scaled by
  /// n_decode / count (cost per decode falls with the batch, so that too is a lower bound).
  double decode_step_s(int64_t n_decode) const;
  /// Seconds per prefill token next to decodes (see the file comment); 0 while nothing is measured.
  double prefill_token_s() const;

 private:
  static void update(double& average, double sample);

  double slack_;
  int64_t max_tokens_;
  int64_t min_tokens_;
  double itl_limit_s_;
  std::vector<double> decode_step_s_;  // [max_decode + 1], index n_decode; 0: not measured yet
  // The last kWindow mixed steps, a ring: signed excess seconds over decode_step_s and prefill
  // tokens; the sums are recomputed from the ring (no drift from adding and subtracting).
  std::array<double, kWindow> excess_s_{};
  std::array<int64_t, kWindow> tokens_{};
  int n_mixed_ = 0;                    // mixed steps recorded (the ring holds min(n, kWindow))
  double prefill_only_token_s_ = 0;    // from prefill-only steps; 0: not measured yet
};

}  // namespace qs
