// Speculative decoding with a draft model (Leviathan et al. 2023; llama.cpp's --model-draft,
// vLLM's draft_model method): a smaller model with the target's tokenizer runs on its own backend
// instance with its own paged KV cache and proposes k tokens: for a greedy request the argmax
// (after the request's logit bias and penalties: a point mass, verified by the one-hot step), for
// a sampled request a draw from the draft's own processed distribution q with the request's
// settings, returned with q (DraftRequest::probs) for the general step (sampling/rejection_sampler.h).
//
// Draft randomness: the draw of the draft at token position t (0-based index in the sequence)
// uses output t of std::mt19937_64 seeded with draft_seed(request seed), a stream apart from the
// target's (seeded with the request seed, one output per emitted token). Keyed by position, a
// uniform is only reused after the draft it made was rejected before influencing any emitted token
// (drafts after the first rejection are discarded), so the drafts stay independent of the
// target's draws and of each other, and a seeded request gives the same tokens every run.
//
// Per sequence the proposer keeps the tokens whose KV rows its cache holds. Each propose():
//   1. sync: keep the longest common prefix of those tokens and the sequence's tokens now (the
//      rejected drafts of the last step fall away: their rows are simply overwritten later), at
//      most all but the last token (its logits give the first draft);
//   2. catch up: compute the sequence's tokens past that prefix (the first time the whole prompt,
//      later the target's accepted drafts and its new token: usually 1..k+1 tokens), the last row
//      sampled (argmax or a draw from q, as above) -> draft 0;
//   3. draft j sampled after computing draft j-1 (one token per sequence per step).
// All sequences go through the same steps (one batched StepRunner step per round, chunks within
// the draft backend's max_batch_tokens and max_seqs), so k drafts for n sequences cost k draft
// steps (+ catch-up chunks), not n * k. The k-th draft is proposed but not computed.
//
// KV blocks come from the proposer's own BlockManager over the draft backend's blocks; a sequence
// that cannot get a block proposes nothing this step and its draft KV is dropped (recomputed the
// next time blocks are free). Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "engine/draft_proposer.h"
#include "engine/step_runner.h"
#include "kv/block_manager.h"

namespace qs {

class DraftModelProposer final : public DraftProposer {
 public:
  /// `backend`: the draft model's (prepared, with KV storage; its own instance, never the
  /// target's), which must outlive the proposer.
  explicit DraftModelProposer(Backend& backend);
  ~DraftModelProposer() override;

  void propose(std::span<const DraftRequest> requests) override;
  void release(uint64_t seq_id) override;
  std::string method() const override { return "draft_model"; }

  /// Draft-model forward steps run by the last propose() (catch-up chunks and draft steps).
  int64_t last_steps() const { return last_steps_; }
  /// Tokens whose draft KV is held for `seq_id` (0 when none): for tests.
  int64_t cached_tokens(uint64_t seq_id) const;
  /// KV blocks of the draft backend not held by any sequence.
  int32_t free_kv_blocks() const { return blocks_.n_allocatable(); }

 private:
  struct DraftSequence {
    std::vector<int32_t> computed;     // tokens whose KV rows are valid, position order
    std::vector<int32_t> block_table;  // the proposer's block ids
  };
  // One sequence's work in the propose() in progress.
  struct Work {
    const DraftRequest* request;
    DraftSequence* seq;
    std::vector<int32_t> tokens;  // the sequence's tokens, then the drafts so far
    int64_t n_computed = 0;       // of `tokens`, KV rows valid
    int32_t row = -1;             // its logits row in the step in progress (-1: none)
    int64_t n_added = 0;          // tokens it added to the step in progress
    bool active = true;
    SequenceSampling sampling;    // the draft's: the request's params, draft_seed, draws = position
    bool sampled = false;         // drafts drawn from q (non-greedy request): return q
  };
  bool reserve(DraftSequence& seq, int64_t n_tokens);  // blocks covering n_tokens; false when short
  void drop(Work& w);                                  // frees the sequence's blocks, no drafts

  Backend& backend_;
  BlockManager blocks_;
  StepRunner runner_;
  std::unordered_map<uint64_t, DraftSequence> sequences_;
  std::vector<Work> work_;
  int64_t last_steps_ = 0;
};

/// Seed of the draft model's random stream for a request seeded with `seed`: SplitMix64 (Steele,
/// Lea, Flood 2014) of seed XOR a constant, so it differs from the target's stream.
uint64_t draft_seed(uint64_t seed);

/// The proposer `spec` asks for: null when speculation is off, n-gram lookup, or a draft model
/// over `draft` (its own backend, outliving the proposer). Throws qs::Error when spec.draft_model
/// is set without a draft backend, or the draft's logits rows differ from the target's.
std::unique_ptr<DraftProposer> make_draft_proposer(const SpecDecodeOptions& spec, const Backend& target, Backend* draft);

}  // namespace qs
