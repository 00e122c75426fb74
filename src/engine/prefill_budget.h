// Chunked-prefill budget that keeps inter-token latency (ITL) flat while prompts prefill.
//
// A step that carries prefill chunks next to running decodes makes every running stream wait for
// the whole step, so the prefill tokens of such a step are capped by time: the step may take at
// most (1 + slack) times a decode-only step. The controller learns two costs online from the
// steps the engine runs (exponential moving averages, weight 1/4 on the newest sample):
//   decode_step_s   wall seconds of a step with decode tokens only,
//   prefill_token_s wall seconds per prefill token (a mixed step's excess over decode_step_s, or a
//                   prefill-only step's time divided by its tokens, which includes the step's
//                   fixed cost and so errs towards smaller chunks),
// and allows floor(slack * decode_step_s / prefill_token_s) prefill tokens, at least one KV block
// (so long prompts always progress) and at most --max-batched-tokens. Steps without decodes are
// not capped: nobody is streaming. This is the "decode-maximal batching" idea of Sarathi-Serve
// (Agrawal et al., 2024) with the chunk size derived from measured step times instead of a fixed
// token count.
#pragma once

#include <cstdint>

namespace qs {

class PrefillBudget {
 public:
  /// `slack` >= 0 (0 disables the cap: every step may use `max_batched_tokens`);
  /// `min_tokens` >= 1 tokens are always allowed.
  PrefillBudget(double slack, int64_t max_batched_tokens, int64_t min_tokens);

  /// Prefill tokens a step that also carries decode tokens may add.
  int64_t tokens_with_decode() const;

  /// Records one finished step: `n_decode` decode tokens, `n_prefill` prefill tokens, its wall
  /// time in seconds.
  void record(int64_t n_decode, int64_t n_prefill, double seconds);

  double decode_step_s() const { return decode_step_s_; }
  double prefill_token_s() const { return prefill_token_s_; }

 private:
  static void update(double& average, double sample);

  double slack_;
  int64_t max_tokens_;
  int64_t min_tokens_;
  double decode_step_s_ = 0;    // 0: not measured yet
  double prefill_token_s_ = 0;  // 0: not measured yet
};

}  // namespace qs
