// The accept / resample step of speculative decoding (Leviathan, Kalman, Matias 2023, "Fast
// Inference from Transformers via Speculative Decoding", Algorithm 1 and Appendix A.1; the same
// step vLLM's RejectionSampler and llama.cpp's speculative example run).
//
// A draft token x was proposed from a draft distribution q; the target model gives p at the same
// position (both after every logits processor: bias, penalties, grammar mask, temperature, top-k,
// top-p, min-p). Then
//   accept x            with probability min(1, p(x) / q(x)),
//   else output y ~ normalize(max(0, p - q)),
// and the output is distributed exactly as p (Theorem 3.5 there).
//
// N-gram prompt lookup has no draft distribution: the proposal is deterministic, q = one-hot(x).
// The step then becomes: accept x with probability p(x); on rejection draw y from p with x
// removed, renormalized. That is the same law as "draw y ~ p; accept iff y == x; otherwise y is
// the resampled token" (P(y = x) = p(x); P(y = z | y != x) = p(z) / (1 - p(x))), which needs one
// uniform draw per position instead of two. The engine uses this form: the backend samples every
// verified row from p as it samples any row, and the engine accepts while sampled == draft
// (count_accepted below), so the k+1 rows of a verify step use RNG draws d, d+1, .., d+k exactly as
// k+1 one-token steps would; a seeded sequence gives the same tokens with or without drafts (given
// the same logits). Greedy rows (temperature 0) reduce to "accept while argmax == draft".
//
// A draft model that samples its drafts (x ~ q, its own distribution after the same transforms)
// uses the general step, in the one-uniform form rejection_sample(p, q, x, u): the backend's
// sampler computes p for the verified row, takes the row's one RNG draw u (draw d + j, as above)
// and accepts iff u < p(x) / q(x); on rejection u is uniform on [p(x) / q(x), 1) and independent
// of the decision, so u' = (u - p(x)/q(x)) / (1 - p(x)/q(x)) is a fresh uniform for the residual
// draw. The accounting of draws stays one per emitted token. The emitted token is x when
// accepted, else a token with p > q (never x), so count_accepted (sampled == draft) still counts
// the accepted drafts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qs {

struct RejectionResult {
  int32_t token = -1;     // x when accepted, else the resampled token
  bool accepted = false;
};

/// Algorithm 1's step for one position. `target_probs` p and `draft_probs` q are [vocab] f32
/// distributions (each summing to 1 within rounding), `draft_token` x was drawn from q (q(x) > 0),
/// `u_accept` and `u_resample` are independent uniforms in [0, 1). Accepts when
/// u_accept * q(x) < p(x); else draws by inverse CDF over max(0, p - q) with u_resample (when that
/// residual is all zero, which needs p == q up to rounding, x is accepted if p(x) > 0, else the
/// draw is from p itself: the rejection had probability ~0 and p's zeros are never emitted).
/// Throws qs::Error on size mismatch, an id outside the vocabulary, or q(x) <= 0.
RejectionResult rejection_sample(std::span<const float> target_probs, std::span<const float> draft_probs,
                                 int32_t draft_token, double u_accept, double u_resample);

/// Algorithm 1's step with one uniform `u` in [0, 1) (see the file comment): r = p(x) / q(x);
/// accepted when u * q(x) < p(x); else the residual draw uses u' = (u * q(x) - p(x)) / (q(x) -
/// p(x)), which is uniform on [0, 1) given the rejection. Same law as the two-uniform form; same
/// errors. Used by the CPU backend's sampler for rows verifying a sampled draft.
RejectionResult rejection_sample(std::span<const float> target_probs, std::span<const float> draft_probs,
                                 int32_t draft_token, double u);

/// The one-hot form (q = one-hot(draft_token)): accept with probability p(x), else draw from p
/// without x. One uniform `u`: y = inverse-CDF draw of p at u; accepted iff y == x. Throws
/// qs::Error when the id is outside the vocabulary or p sums to 0.
RejectionResult rejection_sample_one_hot(std::span<const float> target_probs, int32_t draft_token, double u);

/// Verified rows of one sequence: `sampled` [k + 1] tokens the backend drew for positions after
/// the last accepted token and after each of the `drafts` [k]. Returns the number a of leading
/// drafts accepted (sampled[j] == drafts[j] for j < a); the sequence gains sampled[0, a] (a + 1
/// tokens: the accepted drafts, then the correction or bonus token). Throws qs::Error when
/// sampled.size() != drafts.size() + 1.
int32_t count_accepted(std::span<const int32_t> drafts, std::span<const int32_t> sampled);

}  // namespace qs
