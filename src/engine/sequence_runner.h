// One sequence through the step runner, without the scheduler: what `generate`, `bench` and
// `logits` need. KV blocks come from a BlockManager over the backend's blocks (the only
// allocator; no prefix caching), the steps from StepRunner (the path serving uses).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/step_runner.h"
#include "kv/block_manager.h"

namespace qs {

class SequenceRunner {
 public:
  /// `backend` must be prepared, with KV storage, and outlive the runner.
  explicit SequenceRunner(Backend& backend);
  ~SequenceRunner();

  /// Releases the sequence's blocks and forgets its tokens.
  void reset();
  /// Tokens in the sequence (computed).
  int64_t n_tokens() const { return static_cast<int64_t>(tokens_.size()); }

  /// Appends `tokens` and computes them in chunks of at most the backend's max_batch_tokens.
  /// With `all_logits`, every appended token's raw logits row is returned in `logits_out`
  /// ([tokens.size(), vocab_rows] f32, resized); otherwise the last token's row is sampled with
  /// `sampling` (null: greedy) and the sampled id returned (-1 when all_logits). The first
  /// append after reset() is the prompt (penalties: later tokens are output). The caller advances
  /// sampling->draws after a non-greedy draw. Throws qs::Error
  /// when the tokens do not fit the context or the KV cache, or the backend fails.
  int32_t append(std::span<const int32_t> tokens, SequenceSampling* sampling, bool all_logits = false,
                 std::vector<float>* logits_out = nullptr);

  /// Speculative verification: appends `token` (the last sampled one) and `drafts` [k] and
  /// computes them in one step with k + 1 sampled rows, row j sampling the token after drafts
  /// 0..j-1 (RNG draws sampling->draws + j). Returns the sampled ids [k + 1] (valid until the
  /// next call); keep the accepted prefix with truncate(). `draft_probs` ([k, vocab_rows] f32 or
  /// empty): the distributions sampled drafts were drawn from (StepSequence::draft_probs), so the
  /// rows run Leviathan et al.'s step. Throws qs::Error like append(), and when 1 + k exceeds the
  /// backend's max_batch_tokens.
  std::span<const int32_t> verify(int32_t token, std::span<const int32_t> drafts, SequenceSampling* sampling,
                                  std::span<const float> draft_probs = {});
  /// Forgets the tokens past the first `n_tokens` (rejected drafts). Their KV rows are simply
  /// overwritten by later steps; the blocks stay with the sequence. Throws qs::Error when
  /// n_tokens exceeds n_tokens() or cuts into the prompt.
  void truncate(int64_t n_tokens);

 private:
  void grow(int64_t n_tokens);

  Backend& backend_;
  BlockManager blocks_;
  StepRunner runner_;
  std::vector<int32_t> tokens_;
  int64_t n_prompt_ = 0;  // tokens of the first append after reset(): the prompt
  std::vector<int32_t> block_table_;
  std::vector<int32_t> sampled_;  // verify()'s result
};

}  // namespace qs
