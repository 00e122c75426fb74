// A grammar compiled for one vocabulary: immutable after construction and shared read-only by
// every matcher (one per sequence) on any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/token_mask_cache.h"
#include "constrained/token_vocabulary.h"

namespace qs::constrained {

struct CompiledGrammar {
  Grammar grammar;
  std::shared_ptr<const TokenVocabulary> vocab;
  std::vector<PositionTokens> position_tokens;  // indexed by grammar position
  double compile_ms = 0;                        // wall time of parse + mask cache build

  size_t memory_bytes() const {
    size_t n = grammar.elements.size() * sizeof(Element);
    for (const auto& p : position_tokens) n += p.memory_bytes();
    return n;
  }
};

}  // namespace qs::constrained
