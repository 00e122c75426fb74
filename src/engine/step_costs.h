// Learned wall time of one engine step, for TTFT prediction (engine/ttft_predictor.h).
//
// Cost model (seconds). A step computes `rows` tokens; `L` of them produce logits (one per decode,
// one per prefill chunk that ends its prompt) and the other `c = rows - L` are prefill tokens that
// only fill the KV cache:
//   step_s(L, c) = decode_s(max(L, 1)) + c' x prefill_token_s(c'),   c' = c - (L == 0 ? 1 : 0)
// i.e. a step costs what a decode-only step with as many logits rows costs, plus a marginal cost
// per further prefill token. A step without logits rows (a chunk in the middle of a long prompt)
// is costed as a one-row step plus c - 1 tokens: its first row carries the fixed per-step cost
// (reading the weights once), the LM head of one row being small next to a chunk.
//   decode_s(n)          learned per n from steps with c' = 0 (decode-only steps, and steps
//                        whose prefill chunks all end their prompt with one token); unmeasured n
//                        are interpolated linearly between the measured neighbours, extrapolated
//                        from the two nearest measured counts (slope >= 0), or taken flat when
//                        only one count was measured;
//   prefill_token_s(c')  learned per power-of-two bucket of c' (1, 2-3, 4-7, ...): on a CPU the
//                        marginal cost of a token depends on the chunk size (a few rows ride on
//                        the weight reads of the decode rows, a 512-token chunk is compute bound),
//                        so one figure for all chunk sizes is wrong at one end; an unmeasured
//                        bucket takes the nearest measured one.
// Learning inverts the model: a step of t seconds with c' >= 1 and decode_s(max(L, 1)) known adds
// e = t - decode_s(max(L, 1)) (signed) and c' to its bucket's averages; prefill_token_s = max(0,
// mean(e) / mean(c')), a ratio of averages, not an average of per-step ratios clamped at 0 (which
// keeps the noise above the decode cost, drops the noise below it, and divides it by small c').
// t is first clipped at twice the average of its kind once one exists (a Huber-style bound): on a
// shared CPU a step descheduled for seconds would otherwise raise the costs for many steps, and
// while inflated costs turn every request away no step runs to lower them again. A sustained
// slowdown still raises them, by 1/4 a step at most: every average is an exponential moving average
// with weight 1/4 on the newest sample, following the machine's speed (other processes included).
// Attention's growth with context length is not modelled (a documented error for long prompts).
#pragma once

#include <cstdint>
#include <vector>

namespace qs {

class StepCosts {
 public:
  static constexpr int kBuckets = 24;  // prefill buckets: [2^b, 2^(b+1)) tokens, b < kBuckets

  StepCosts() = default;
  /// `max_logits_rows` >= 1: the most logits rows a step can have (--max-num-seqs).
  explicit StepCosts(int64_t max_logits_rows);

  /// Records one step: `logits_rows` (L) rows with logits, `prefill_tokens` (c) prefill tokens
  /// without logits, `seconds` of wall time. Non-positive or non-finite times are ignored.
  void record(int64_t logits_rows, int64_t prefill_tokens, double seconds);

  /// Seconds of a step with `logits_rows` and `prefill_tokens` (see the file comment); 0 for an
  /// empty step or while nothing is measured.
  double step_s(int64_t logits_rows, int64_t prefill_tokens) const;
  /// Seconds of a step with n >= 1 logits rows and no other prefill token; 0 while none measured.
  double decode_s(int64_t n) const;
  /// Marginal seconds per prefill token in a step with `c` >= 1 such tokens; 0 while none measured.
  double prefill_token_s(int64_t c) const;
  /// True once a step with c >= 1 prefill tokens in c's bucket was measured (else
  /// prefill_token_s(c) is another bucket's figure).
  bool prefill_measured(int64_t c) const;
  /// True once a decode step and a prefill chunk were measured (before that, predictions are 0).
  bool known() const;

 private:
  static int bucket_of(int64_t c);
  std::vector<double> decode_s_;  // [max_logits_rows + 1] seconds, index n; < 0: not measured
  // Per bucket [kBuckets]: moving averages of a step's seconds beyond decode_s(max(L, 1)) (signed)
  // and of its c'; tokens < 0: not measured. prefill_token_s = max(0, excess / tokens).
  std::vector<double> prefill_excess_s_ = std::vector<double>(kBuckets, 0.0);
  std::vector<double> prefill_tokens_ = std::vector<double>(kBuckets, -1.0);
};

}  // namespace qs
