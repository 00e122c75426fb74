// Engine-thread state of one generation: its request, KV bookkeeping (SchedSequence: tokens,
// computed count, block table), and output pipeline (sampler -> incremental detokenizer ->
// stop-string matcher -> output guard -> RequestStream).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/output_guard.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "sampling/sampler.h"
#include "tokenizer/incremental_decoder.h"

namespace qs {

struct EngineSequence : SchedSequence {
  /// Throws qs::Error when the sampling parameters are invalid for `vocab` tokens.
  EngineSequence(EngineRequest r, const Tokenizer& tokenizer, int32_t vocab, OutputGuardOptions guard_options)
      : request(std::move(r)),
        stream(std::make_shared<RequestStream>()),
        sampler(request.sampling, vocab),
        decoder(tokenizer, request.skip_special_tokens),
        stop(request.stop_strings),
        guard(guard_options) {
    tokens = request.prompt_ids;
    n_prompt = static_cast<int64_t>(tokens.size());
    if (request.timeout_s > 0) {
      deadline = request.arrival + std::chrono::duration_cast<SteadyClock::duration>(
                                       std::chrono::duration<double>(request.timeout_s));
    }
  }

  int64_t prompt_tokens() const { return n_prompt; }
  int64_t n_output() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  std::span<const int32_t> prompt_ids() const { return {tokens.data(), static_cast<size_t>(n_prompt)}; }
  std::span<const int32_t> output_ids() const {
    return {tokens.data() + n_prompt, static_cast<size_t>(n_output())};
  }

  EngineRequest request;
  std::shared_ptr<RequestStream> stream;
  Sampler sampler;
  IncrementalDecoder decoder;
  StopMatcher stop;
  OutputGuard guard;
  SteadyClock::time_point deadline = SteadyClock::time_point::max();
  bool finished = false;
};

}  // namespace qs
