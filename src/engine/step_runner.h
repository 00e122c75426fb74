// The one place where a scheduled step becomes a StepBatch + SamplingBatch and the backend runs
// it. The serving engine, `generate`, `bench` and `logits` all step through a StepRunner, so every
// command measures and exercises the path serving uses.
//
// Per step: clear(), add() each sequence's chunk (tokens [first, first + n) of the sequence, its
// block table from the BlockManager, how many logits rows it wants and how to sample them), then
// run(): the batch is laid out as flat arrays (backend/step_batch.h), sampling rows are filled
// (backend/sampling_batch.h), Backend::forward runs, and the StepOutput rows come back in add()
// order (a sequence's rows are consecutive, starting at the index add() returned).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "sampling/sampling_params.h"

namespace qs {

/// How one sequence's logits rows are sampled. `params` must be valid for the vocabulary
/// (sampling/sampling_params.h validate()); `draws` counts the RNG outputs the sequence used so
/// far (the caller advances it: +1 per non-greedy sampled token).
struct SequenceSampling {
  SamplingParams params;
  uint64_t seed = 0;          // the seed in use (params.seed or one drawn at submission)
  uint64_t draws = 0;
  int32_t n_logprobs = -1;    // -1: none; 0: the sampled token's logprob; k: plus the top k
};

struct StepSequence {
  uint64_t seq_id = 0;                        // stable per sequence (per-sequence backend state)
  std::span<const int32_t> tokens;            // the sequence's tokens so far, prompt first
  int64_t n_prompt = 0;                       // leading prompt tokens (for penalties)
  int64_t first = 0;                          // compute tokens [first, first + n)
  int64_t n = 0;
  std::span<const int32_t> block_table;       // KV block ids in position order, covering first + n
  int32_t n_logits = 0;                       // logits rows for the last n_logits tokens (0, 1, or
                                              // 1 + k for a decode token and k verified drafts)
  const SequenceSampling* sampling = nullptr; // null: greedy, no logprobs
  // vLLM's min_tokens: a logits row whose output so far (tokens past n_prompt) is shorter than
  // min_tokens gets kSuppressLogitBias (sampling_params.h) on every id of stop_token_ids. 0: off.
  int32_t min_tokens = 0;
  std::span<const int32_t> stop_token_ids;
  bool want_logits = false;                   // return the raw logits rows too
  std::span<const uint32_t> allowed_mask;     // empty, or [ceil(vocab_rows / 32)] u32 for every row
  // Reserve one mask row per logits row (all tokens allowed until written) that the caller fills
  // through mask_row(first_row + j) between launch() and wait(), e.g. a grammar matcher on a
  // worker thread while the forward pass runs (row j of a speculative verify: the state after
  // the first j drafts). Ignored when allowed_mask is given (then shared by every row) or
  // n_logits == 0.
  bool mask_later = false;
  // Speculative sampling with a sampled draft (sampling/rejection_sampler.h): the draft
  // distributions q of the chunk's drafts, [n_logits - 1, vocab_rows] f32, row j the q that
  // draft j (token first + n - n_logits + j + 1) was drawn from. Row j < n_logits - 1 then runs
  // Leviathan et al.'s accept / resample step against it (greedy rows ignore it). Empty: drafts
  // are verified as point masses (the row is sampled from p; accepted when it equals the draft).
  std::span<const float> draft_probs;
  // Return every logits row's processed distribution in StepOutput::probs and draw the token
  // from it (a draft model's rows: the draft token and its q).
  bool want_probs = false;
};

class StepRunner {
 public:
  /// `backend` must be prepared and have KV storage; it must outlive the runner.
  explicit StepRunner(Backend& backend);

  void clear();
  /// Adds one sequence's chunk; returns the index of its first logits row. Throws qs::Error when
  /// the chunk is empty, extends past `tokens`, its block table does not cover it, n_logits
  /// exceeds n, or the mask or draft_probs has the wrong size.
  int32_t add(const StepSequence& seq);
  /// Tokens added since clear().
  int64_t n_tokens() const { return n_tokens_; }
  /// Runs the step on the backend and returns its output (valid until the next run()). Throws
  /// qs::Error when the backend rejects the batch or fails. run() = launch() + wait().
  const StepOutput& run();
  /// Starts the step (Backend::launch); mask rows may be written until wait(). On the CPU backend
  /// the forward pass runs inside launch(), so masks must be computed on other threads.
  void launch();
  /// Finishes the step (Backend::wait: sampling reads the masks) and returns its output.
  const StepOutput& wait();
  /// The writable mask row [mask_words()] u32 of logits row `row` (add()'s result + j for the
  /// j-th row of a sequence), when it was added with mask_later; empty span otherwise.
  /// Valid until the next clear() / add().
  std::span<uint32_t> mask_row(int32_t row);
  int32_t mask_words() const { return sampling_.mask_words(); }
  /// Wall time of the last run()'s Backend::forward, seconds.
  double last_forward_seconds() const { return last_forward_s_; }

 private:
  Backend& backend_;
  StepBatchBuilder builder_;
  StepBatch batch_;
  SamplingBatch sampling_;
  StepOutput output_;
  int64_t n_tokens_ = 0;
  double last_forward_s_ = 0;
  std::chrono::steady_clock::time_point launch_start_;
};

}  // namespace qs
