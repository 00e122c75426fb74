// Engine-thread state of one generation: its request, KV blocks, progress and output pipeline
// (sampler -> incremental detokenizer -> stop-string matcher -> RequestStream).
#pragma once

#include <memory>
#include <vector>

#include "engine/request.h"
#include "engine/stop_matcher.h"
#include "kv/block_pool.h"
#include "sampling/sampler.h"
#include "tokenizer/incremental_decoder.h"

namespace qs {

struct EngineSequence {
  /// Throws qs::Error when the sampling parameters are invalid for `vocab` tokens.
  EngineSequence(EngineRequest r, const Tokenizer& tokenizer, int32_t vocab)
      : request(std::move(r)),
        stream(std::make_shared<RequestStream>()),
        sampler(request.sampling, vocab),
        decoder(tokenizer, request.skip_special_tokens),
        stop(request.stop_strings) {}

  int64_t prompt_tokens() const { return static_cast<int64_t>(request.prompt_ids.size()); }
  bool prefill_done() const { return n_prefilled == prompt_tokens(); }

  EngineRequest request;
  std::shared_ptr<RequestStream> stream;
  Sampler sampler;
  IncrementalDecoder decoder;
  StopMatcher stop;
  BlockTable blocks;
  int64_t n_prefilled = 0;  // prompt tokens whose KV is in the cache
  std::vector<int32_t> output_ids;
  bool finished = false;
};

}  // namespace qs
