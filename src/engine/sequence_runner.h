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

 private:
  void grow(int64_t n_tokens);

  Backend& backend_;
  BlockManager blocks_;
  StepRunner runner_;
  std::vector<int32_t> tokens_;
  int64_t n_prompt_ = 0;  // tokens of the first append after reset(): the prompt
  std::vector<int32_t> block_table_;
};

}  // namespace qs
