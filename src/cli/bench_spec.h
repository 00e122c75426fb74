// `qwenserve bench` tests of speculative decoding (issue 14 part 4):
//
//   --spec-verify K   the cost of a verify step with k = 1..K drafts (1 + k query tokens, k + 1
//                     sampled rows, through SequenceRunner::verify: the serving path) against a
//                     one-token decode step at the same context, median of the per-step times,
//                     with the bound max(decode step, (k + 1) / prefill tokens/s) and the speedup
//                     that acceptance rates 0.3 / 0.5 / 0.7 imply: with per-draft acceptance a,
//                     a verify step yields E = (1 - a^(k+1)) / (1 - a) tokens on average
//                     (Leviathan et al. 2023, eq. 1), so speedup = E * t_decode / t_verify(k).
//   --spec-repeat N   a workload whose output repeats: greedy generation of N tokens from a prompt
//                     that repeats a 16-token phrase 4 times (optionally with --spec-repeat-bias B
//                     added to the phrase's tokens, keeping the output among them), once without
//                     and once with speculation (--spec-ngram / --draft-max, default ngram 3 x 4
//                     drafts); decode tokens/s of both, their ratio, the acceptance rate, and
//                     whether the two outputs are identical token for token (they must be).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "engine/ngram_proposer.h"

namespace qs::cli {

struct SpecBenchOptions {
  int32_t verify_max = 0;       // K of --spec-verify (0: off)
  int64_t repeat_tokens = 0;    // N of --spec-repeat (0: off)
  float repeat_bias = 0;        // --spec-repeat-bias
  SpecDecodeOptions spec;       // for --spec-repeat
  int repetitions = 5;
  int64_t context_tokens = 8;   // prefilled before the verify steps (--tg-prompt)
  bool json = false;
};

/// Prompt tokens the --spec-repeat workload uses.
inline constexpr int64_t kSpecRepeatPromptTokens = 64;

/// Prints the verify-cost curve. `prefill_tokens_per_s` is the measured prefill rate for the
/// bound (0: unknown, the column prints n/a). Throws qs::Error from the backend.
void run_spec_verify_curve(Backend& backend, const SpecBenchOptions& options, double prefill_tokens_per_s);

/// Prints the repeating-workload comparison. Throws qs::Error from the backend.
void run_spec_repeat(Backend& backend, const SpecBenchOptions& options);

}  // namespace qs::cli
