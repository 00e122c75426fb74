// Per-position token classification, precomputed once per compiled grammar (the "adaptive token
// mask cache" idea of XGrammar, Dong et al. 2024, implemented from its description).
//
// For every kBytes position P of the grammar, each token of the vocabulary is run through the
// stack-set parser starting from the single stack [P] (a depth-first walk over the token trie
// with memoized parser-state transitions, so a shared prefix is parsed once):
//   - accepted:  the whole token is consumed while the stack stays at or above P's frame, or it
//                ends exactly where P's rule ends. It is valid after any real stack topped by P.
//   - uncertain: the token only survives by continuing past the end of P's rule into an
//                approximated context (any position that may follow the rule). It must be
//                checked against the real stack at mask time.
//   - rejected:  everything else; never allowed after P.
// At mask time the matcher ORs the accepted sets of its stacks' tops and checks the (usually
// few) uncertain tokens exactly.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/token_vocabulary.h"

namespace qs::constrained {

struct PositionTokens {
  /// Accepted tokens, either as a bitmask of TokenVocabulary::mask_words() words (when large) or
  /// as sorted ids (when small); exactly one of the two is non-empty, or both are empty.
  std::vector<uint32_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> uncertain;  // sorted token ids

  size_t memory_bytes() const {
    return accepted_bits.size() * 4 + accepted_ids.size() * 4 + uncertain.size() * 4;
  }
};

/// Classifies the vocabulary at every kBytes position of `grammar`; the result is indexed by
/// position (empty entries for other elements). Throws qs::Error when `deadline` passes (compile
/// time limit) or more than `max_parser_states` distinct parser states arise.
std::vector<PositionTokens> build_token_mask_cache(const Grammar& grammar,
                                                   const TokenVocabulary& vocab,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   size_t max_parser_states);

}  // namespace qs::constrained
