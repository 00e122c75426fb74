// Single-sequence generation through the step runner (engine/sequence_runner.h): chunked prefill
// of the prompt, then one token per decode step, until a stop token or max_tokens. With
// speculative decoding (options.spec) a decode step verifies the drafts of the tokens so far (n-gram
// lookup, or a draft model on its own backend: engine/draft_proposer.h) in one step and keeps the
// accepted ones (sampling/rejection_sampler.h). Used by
// `qwenserve generate`; the serving engine's scheduler generalises this to many sequences.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/ngram_proposer.h"
#include "sampling/sampling_params.h"

namespace qs {

struct GenerationOptions {
  int32_t max_tokens = 256;                 // generated tokens at most
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;      // generation ends after emitting one of these
  SpecDecodeOptions spec;                   // speculative decoding (off by default)
};

struct GenerationResult {
  int64_t prompt_tokens = 0;
  std::vector<int32_t> output_ids;          // generated tokens, stop token included
  std::string finish_reason;                // "stop" (stop token) or "length" (max_tokens/context)
  double ttft_ms = 0;                       // start of prefill -> first token sampled
  double prefill_ms = 0;                    // forward passes over the prompt
  double decode_ms = 0;                     // forward passes + sampling after the first token
  int64_t decode_steps = 0;                 // forward steps after the first token
  int64_t spec_draft_tokens = 0;            // speculative decoding: drafts verified
  int64_t spec_accepted_tokens = 0;         // of those, accepted
  double spec_propose_ms = 0;               // time spent proposing drafts (n-gram or draft model)
  int64_t spec_propose_steps = 0;           // decode steps that asked for drafts
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;  // (output tokens - 1) / decode time
};

class Generator {
 public:
  /// `backend` (prepared, with KV storage) must outlive the generator; so must `draft_backend`,
  /// the draft model's own backend (prepared, with KV storage), needed when
  /// options.spec.draft_model.
  explicit Generator(Backend& backend, Backend* draft_backend = nullptr)
      : backend_(backend), draft_backend_(draft_backend) {}

  /// Generates from `prompt_ids` (non-empty). `on_token` is called with each new token id as soon
  /// as it is sampled. The KV blocks are released before returning. Throws qs::Error when the
  /// prompt is empty, does not fit the context, the KV cache has too few blocks, the sampling
  /// parameters are invalid, or options.spec.draft_model is set without a draft backend.
  GenerationResult run(const std::vector<int32_t>& prompt_ids, const GenerationOptions& options,
                       const std::function<void(int32_t)>& on_token);

 private:
  Backend& backend_;
  Backend* draft_backend_;
};

}  // namespace qs
