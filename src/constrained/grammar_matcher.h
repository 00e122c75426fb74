// Per-sequence state of constrained decoding: which tokens may come next, given the tokens so far.
//
// One GrammarMatcher per sequence (not thread-safe; use it from one thread at a time), many
// matchers per shared CompiledGrammar. Per decoding step:
//
//   matcher.fill_next_token_bitmask(words);   // uint32 words[vocab.mask_words()]
//   ... sample a token whose bit is set ...
//   matcher.accept_token(id);
//
// Bit (id % 32) of words[id / 32] is set when token id is allowed. Tokens past the tokenizer's
// vocabulary and special tokens are never allowed; stop ids only where the grammar may end. Every
// allowed token keeps the output completable (no dead ends).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "constrained/compiled_grammar.h"
#include "constrained/pda.h"

namespace qs::constrained {

class GrammarMatcher {
 public:
  /// `max_rollback`: accepted tokens kept for rollback() (older history is dropped).
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                          size_t max_rollback = 1 << 20);

  /// Advances over token `id` and returns true when it is allowed; returns false and leaves the
  /// state unchanged otherwise. A stop id is allowed where the grammar may end and terminates
  /// the matcher. Throws qs::Error (state unchanged) when a state would have more live parses
  /// than the grammar's max_live_parses (CompileLimits); the constructor and reset() throw so
  /// for the initial state.
  bool accept_token(int32_t id);
  /// Advances over raw bytes (one history entry); false and no change when they do not fit.
  bool accept_bytes(std::string_view bytes);
  /// Writes the allowed-token bitmask of the next step into words[0, mask_words()). Throws
  /// qs::Error when the mask needs more parser work than the grammar's max_mask_steps
  /// (CompileLimits); the matcher is unchanged and may be used again.
  void fill_next_token_bitmask(uint32_t* words);
  /// The grammar may end here (a stop token is allowed).
  bool can_terminate() const;
  /// A stop token was accepted.
  bool is_terminated() const { return terminated_.back() != 0; }
  /// Undoes the last `n` accepted tokens (n <= num_accepted()); for speculative decoding.
  void rollback(size_t n);
  size_t num_accepted() const { return history_.size() - 1; }
  void reset();
  int32_t mask_words() const { return grammar_->vocab->mask_words(); }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  /// Throws qs::Error past the grammar's max_live_parses (the matcher's state is unchanged).
  bool advance(const std::vector<int32_t>& from, std::string_view bytes, std::vector<int32_t>& to);
  void check_live_parses(size_t n) const;
  void push(std::vector<int32_t> state, bool terminated);

  std::shared_ptr<const CompiledGrammar> grammar_;
  size_t max_rollback_;
  StackPool pool_;
  std::vector<std::vector<int32_t>> history_;  // parser states, current last
  std::vector<uint8_t> terminated_;
  size_t dropped_ = 0;
  void compute_mask(uint32_t* words);
  /// Sets the bits of the group_ tokens the exact parser accepts from `state`; throws qs::Error
  /// past the grammar's max_mask_steps.
  void check_uncertain(const std::vector<int32_t>& state, uint32_t* words);

  /// Masks of recently seen parser states (a state repeats while a string or loop goes on).
  struct CachedMask {
    std::vector<int32_t> state;
    std::vector<uint32_t> words;
  };
  static constexpr size_t kMaskCacheSize = 8;
  std::vector<CachedMask> mask_cache_;
  size_t mask_cache_next_ = 0;
  std::vector<int32_t> scratch_a_, scratch_b_, group_, tops_, pending_;
  std::vector<std::vector<int32_t>> depth_states_;  // check_uncertain's parser state per prefix length
  std::vector<std::array<int32_t, 3>> keys_;
};

}  // namespace qs::constrained
