// How many drafts to verify per sequence and step (speculative decoding's k), chosen from each
// sequence's acceptance so far and the learned cost of a step (engine/step_costs.h), so that a
// verify step is only as long as it pays: `--spec-adaptive` (off: always min(--draft-max, room)).
//
// Model (Leviathan et al. 2023, "Fast Inference from Transformer Decoding via Speculative
// Decoding", section 3.1): each draft of a sequence is accepted with probability a, independently,
// until the first rejection; a verify step with k drafts then emits on average
//   E(a, k) = 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a) tokens
// (the accepted drafts and the token sampled after them). A step verifying m drafts in total costs
// cost(m) seconds. For a step of B decoding sequences the choice maximises the expected tokens per
// second, sum_i E(a_i, k_i) / cost(sum_i k_i), over 0 <= k_i <= k_max_i.
//
// Exact solution: the j-th draft of sequence i adds a_i^j expected tokens, which falls with j, so
// for a fixed total m the best choice takes the m largest of all a_i^j (they form a prefix per
// sequence); the optimum is the best of these prefixes over m = 0..sum k_max_i. Ties keep the
// smaller m (fewer drafts, less work for the same rate).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "engine/step_costs.h"

namespace qs {

/// One sequence's acceptance rate under the model above, learned from its verify steps. A step
/// with n >= 1 drafts of which `accepted` were accepted is `accepted` successes in
/// `accepted + (accepted < n)` Bernoulli trials (the positions examined up to the first
/// rejection), the unbiased count for the geometric model. Both counts decay by kDecay per
/// recorded step (a sequence's phases differ: code it copies, then new text), and start from a
/// prior of a = 0.5 worth one trial.
class AcceptanceEstimate {
 public:
  static constexpr double kDecay = 0.8;
  /// Records a verify step: n >= 1 drafts, 0 <= accepted <= n. Other values are ignored.
  void record(int64_t n, int64_t accepted);
  /// The estimate of a, in [0, 1] (it reaches 0 or 1 only after thousands / hundreds of steps).
  double rate() const { return successes_ / trials_; }

 private:
  double successes_ = 0.5;
  double trials_ = 1.0;
};

/// E(a, k): the expected tokens a verify step with k >= 0 drafts emits (see the file comment).
double expected_tokens(double a, int32_t k);

/// Chooses k[i] in [0, k_max[i]] maximising sum_i expected_tokens(a[i], k[i]) / cost(sum_i k[i]),
/// the smallest total among equal rates. `cost(m)`: seconds of a step verifying m drafts in all
/// (m >= 0), > 0. a[i] in [0, 1). Sizes of a, k_max and k equal (B sequences). O(M log M) for
/// M = sum k_max.
void choose_draft_lengths(std::span<const double> a, std::span<const int32_t> k_max,
                          const std::function<double(int64_t)>& cost, std::span<int32_t> k);

/// --spec-adaptive's choice for one step of B decoding sequences: k[i] in [0, k_max[i]] from
/// choose_draft_lengths with cost(m) = costs.step_s(B, m) (seconds; the caller times a step from
/// before the drafts are proposed, so the proposer's work is in it). Exploration, since only the
/// cost of the m chosen is measured again and other m are extrapolated from it:
///   - while `costs` knows no decode-only step, every k is 0 (one step measures it);
///   - while the bucket of m = sum k_max (StepCosts::prefill_measured) is unmeasured, k = k_max;
///   - a sequence whose k stayed below its k_max for kProbeSteps steps in a row gets
///     min(k_max, 2k + 1) on the next step (`steps_below_max[i]` counts them; reset at k_max or a
///     probe), so a cost overestimated by extrapolation, or a passage the sequence starts to copy,
///     is found again.
/// Sizes of a, k_max, steps_below_max and k equal; k_max[i] in [0, kMaxDraftTokens].
inline constexpr int32_t kProbeSteps = 16;
void adaptive_draft_lengths(const StepCosts& costs, std::span<const double> a, std::span<const int32_t> k_max,
                            std::span<int32_t> steps_below_max, std::span<int32_t> k);

}  // namespace qs
