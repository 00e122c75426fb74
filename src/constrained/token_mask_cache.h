// Per-position token classification of a compiled grammar (the "adaptive token mask cache" idea
// of XGrammar, Dong et al. 2024, implemented from its description).
//
// For a kBytes position P of the grammar, each token of the vocabulary is run through the
// stack-set parser starting from the single stack [P] (a depth-first walk over the token trie
// with memoized parser-state transitions, so a shared prefix is parsed once):
//   - accepted:  the whole token is consumed while the stack stays at or above P's frame, or it
//                ends exactly where P's rule ends. It is valid after any real stack topped by P.
//   - uncertain: the token only survives by continuing past the end of P's rule into an
//                approximated context (any position that may follow the rule). It must be
//                checked against the real stack at mask time.
//   - rejected:  everything else; never allowed after P.
//   - conditional: (P inside the body of a counted repetition, Grammar::repeats) the token is
//                accepted for some counts k of the repetition's frame only: it starts `stay` more
//                iterations (valid when k + stay <= max) or leaves the repetition after
//                `exit` more (valid when min <= k + exit <= max). The matcher knows k.
// At mask time the matcher ORs the accepted sets of its stacks' tops, adds the conditional
// tokens whose condition holds, and checks the (usually few) uncertain tokens exactly.
//
// When: positions where a token boundary is common are classified at compile time: the first
// element of an alternative and the element after a rule call. Positions inside a byte sequence
// (after a byte of the same alternative: the rest of a UTF-8 character, the character after a
// backslash, the hex digits of \uXXXX, the rest of a literal) are classified on first use, once
// per compiled grammar: a token rarely ends there (they were about half of the compile time of
// length-bounded strings when maxLength N still unrolled into N chain positions). The result is
// the same either way; only when it is computed differs.
//
// Counted repetitions: a position inside a repetition body is classified once, above a relative
// frame (pda.h), whatever the bound; tokens that need more iterations or leave the repetition
// become conditional, resolved per mask by the count (merge_tops in compiled_grammar.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/token_vocabulary.h"

namespace qs::constrained {

/// A conditional token of a position inside a counted repetition body; -1: no such path.
struct ConditionalToken {
  int32_t id;
  int32_t stay;  // more iterations started (>= 1)
  int32_t exit;  // more iterations completed before leaving the repetition (>= 0)

  /// The condition holds for r = max - k remaining and m = min - k missing iterations.
  bool holds(int64_t r, int64_t m) const { return (stay >= 0 && stay <= r) || (exit >= 0 && m <= exit && exit <= r); }
};

struct PositionTokens {
  /// Accepted tokens, either as a bitmask of TokenVocabulary::mask_words() words (when large) or
  /// as sorted ids (when small); exactly one of the two is non-empty, or both are empty.
  std::vector<uint32_t> accepted_bits;
  std::vector<int32_t> accepted_ids;
  std::vector<int32_t> uncertain;  // sorted token ids
  std::vector<ConditionalToken> conditional;  // by id

  size_t memory_bytes() const {
    return accepted_bits.size() * 4 + accepted_ids.size() * 4 + uncertain.size() * 4 +
           conditional.size() * sizeof(ConditionalToken);
  }
};

/// Bytes that every byte set of a grammar treats alike share a class (the parser-state tables
/// have one column per class).
struct ByteClasses {
  uint8_t class_of[256] = {};
  size_t count = 0;
};

class TokenMaskCache {
 public:
  /// Classifies the compile-time positions of `grammar` (which must outlive the cache), or every
  /// position with `classify_all_now` (tests). Throws qs::Error when `deadline` passes (compile
  /// time limit) or more than `max_parser_states` distinct parser states arise.
  TokenMaskCache(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                 std::chrono::steady_clock::time_point deadline, size_t max_parser_states,
                 bool classify_all_now = false);
  ~TokenMaskCache();
  TokenMaskCache(const TokenMaskCache&) = delete;
  TokenMaskCache& operator=(const TokenMaskCache&) = delete;

  /// The classes of kBytes position `pos` (empty for other elements), classified now if it was
  /// left for first use. Thread-safe; a first use takes a mutex, later ones only an atomic load.
  /// A first-use classification that exceeds the parser-state limit marks every token that may
  /// start there uncertain (exact at mask time, only slower).
  const PositionTokens& at(int32_t pos) const;

  /// Positions classified at compile time.
  static bool classified_at_compile(const Grammar& grammar, size_t pos);
  /// Bytes held by the classifications made so far.
  size_t memory_bytes() const;
  size_t n_positions() const { return entries_.size(); }
  size_t n_built() const;

 private:
  const Grammar& grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  ByteClasses classes_;
  size_t max_parser_states_;
  mutable std::vector<PositionTokens> entries_;          // indexed by grammar position
  mutable std::unique_ptr<std::atomic<uint8_t>[]> built_;  // 1 once entries_[pos] is final
  mutable std::mutex build_mu_;                          // first-use classifications
};

}  // namespace qs::constrained
