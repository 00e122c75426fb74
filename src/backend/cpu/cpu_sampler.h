// Host-side sampling of the CPU backend: turns the logits rows of one step into StepOutput with
// today's samplers (sampling/sampler.h), so results are those of the engine before the seam.
//
// Per row of the SamplingBatch (order and formulas in backend/sampling_batch.h): raw logits are
// copied out when asked; logprobs are log_softmax of the raw row; the allowed-token bitmask sets
// disallowed logits to -inf; then the row's Sampler (logit bias, penalties, temperature, top-k,
// top-p, min-p, one draw) picks the token. A row verifying a sampled draft (draft_probs_row) runs
// the same transforms to the distribution p and Leviathan et al.'s step against the draft's q with
// the row's one draw (sampling/rejection_sampler.h); a want_probs row draws from and returns its
// dense distribution (Sampler::sample_with_distribution). A Sampler per sequence is kept between steps, keyed by
// seq_id and checked against (seed, draws, parameters); a mismatch builds a new one from the seed
// and discards `draws` outputs, so a sequence's random stream never depends on the batch.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/sampling_batch.h"
#include "sampling/sampler.h"

namespace qs {

class CpuSampler {
 public:
  /// Samples every row. `logits` is [sampling.rows.size(), vocab_rows] f32 and is modified in
  /// place (processed logits). Fills `out` completely. Throws qs::Error for invalid parameters,
  /// out-of-range ids, a mask row out of range, or logits that are NaN / all -inf after masking.
  void sample(const SamplingBatch& sampling, float* logits, StepOutput& out);

 private:
  struct Entry {
    std::unique_ptr<Sampler> sampler;
    uint64_t seed = 0;
    uint64_t draws = 0;
    bool used = false;
  };
  Sampler& sampler_for(const SamplingBatch& sampling, const SamplingRow& row);

  std::unordered_map<uint64_t, Entry> samplers_;  // seq_id -> sampler of the last step
  std::vector<float> logprobs_;                   // [vocab_rows] scratch
  std::vector<float> target_probs_;               // [vocab_rows] scratch: p of a verified sampled draft
  std::vector<std::pair<int32_t, float>> heap_;   // top-logprobs scratch
};

}  // namespace qs
