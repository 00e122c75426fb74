// The draft source of speculative decoding, one interface for its two kinds: n-gram prompt lookup
// (engine/ngram_proposer.h, no model) and a draft model (engine/draft_model_proposer.h, a smaller
// model with the target's tokenizer). The engine (engine_spec.cc) and `generate`
// (engine/generator.cc) ask a proposer for up to k drafts per decoding sequence before each step,
// then verify them in one batched target step through the normal StepRunner path.
//
// N-gram lookup is deterministic given the tokens so far: its draft distribution q is a point
// mass and verification uses the one-hot rejection step (sampling/rejection_sampler.h). A draft
// model proposes greedily (argmax after the request's logit bias and penalties) for a greedy
// request, and for a sampled one draws each draft from its own distribution q after the same
// transforms (temperature, top-k, top-p, min-p, penalties, bias) and returns q with it, so the
// target verifies with Leviathan et al.'s accept / resample step. Either way the output keeps the
// target's distribution.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/ngram_proposer.h"
#include "engine/step_runner.h"

namespace qs {

/// One decoding sequence's ask for drafts.
struct DraftRequest {
  uint64_t seq_id = 0;              // stable per sequence (a draft model keeps its KV under it)
  std::span<const int32_t> tokens;  // prompt + output so far; the last one sampled, not yet
                                    // computed by the target
  int32_t k = 0;                    // drafts wanted (>= 1)
  std::vector<int32_t>* out = nullptr;  // cleared, then up to k drafts (fewer when none fit)
  int64_t n_prompt = -1;                // leading prompt tokens of `tokens` (penalties); -1: all
  const SequenceSampling* sampling = nullptr;  // the request's sampling (params, seed); null: greedy
  // Sampled drafts: cleared, then [out->size(), vocab_rows] f32, row j the distribution q that
  // draft j was drawn from. Left empty when the drafts are deterministic (n-gram, greedy, or a
  // backend that cannot return distributions): verify them as point masses.
  std::vector<float>* probs = nullptr;
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  /// Writes drafts for every request (one batched pass where the proposer runs a model).
  /// Throws qs::Error when a backend fails.
  virtual void propose(std::span<const DraftRequest> requests) = 0;
  /// The sequence ended: frees what the proposer keeps for it (a draft model's KV blocks).
  virtual void release(uint64_t seq_id) { (void)seq_id; }
  /// "ngram" or "draft_model" (vLLM's method names).
  virtual std::string method() const = 0;
};

/// N-gram prompt lookup (propose_ngram) behind the proposer interface.
class NgramProposer final : public DraftProposer {
 public:
  NgramProposer(int32_t ngram_max, int32_t ngram_min) : ngram_max_(ngram_max), ngram_min_(ngram_min) {}
  void propose(std::span<const DraftRequest> requests) override {
    for (const DraftRequest& r : requests) {
      propose_ngram(r.tokens, ngram_max_, ngram_min_, r.k, *r.out);
      if (r.probs != nullptr) r.probs->clear();
    }
  }
  std::string method() const override { return "ngram"; }

 private:
  int32_t ngram_max_;
  int32_t ngram_min_;
};

}  // namespace qs
