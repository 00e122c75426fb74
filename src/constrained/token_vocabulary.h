// The tokenizer's vocabulary as the constrained decoder sees it: raw bytes per token id, the
// stop ids, the number of logits rows, and a byte trie of the tokens a grammar may produce.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace qs {
class Tokenizer;
}

namespace qs::constrained {

class TokenVocabulary {
 public:
  /// One trie node in depth-first preorder, 8 bytes (the mask-cache build streams the whole
  /// trie once per grammar position). The root (empty prefix) is implicit; nodes of depth 1 are
  /// its children. `skip` is the index just past the node's subtree; when `has_tokens`, the
  /// tokens whose bytes end at the node are trie_tokens()[token_range(i)).
  struct TrieNode {
    uint8_t byte;
    uint8_t depth;  // 1..255 (longer tokens are left out of the trie, never allowed)
    uint8_t has_tokens;
    uint8_t unused;
    int32_t skip;
  };
  static constexpr size_t kMaxTokenBytes = 255;

  /// `token_bytes[id]`: raw bytes of token id (empty: no token). `stop_ids`: end-of-sequence /
  /// stop tokens, allowed only where the grammar may end. `never_ids`: ids never allowed (special
  /// tokens). `rows`: logits rows (>= token_bytes.size()); ids at or past token_bytes.size() are
  /// never allowed. Throws qs::Error on a stop id outside [0, rows) or rows too small.
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_ids,
                  const std::vector<int32_t>& never_ids, int32_t rows);

  /// The vocabulary of `tokenizer`: special added tokens are never allowed; `stop_ids` empty
  /// means the tokenizer's eos id (when it has one).
  static std::shared_ptr<const TokenVocabulary> from_tokenizer(const Tokenizer& tokenizer,
                                                               int32_t rows,
                                                               std::vector<int32_t> stop_ids = {});

  int32_t rows() const { return rows_; }
  /// uint32 words of one bitmask: ceil(rows / 32).
  int32_t mask_words() const { return (rows_ + 31) / 32; }
  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_stop(int32_t id) const;
  /// The token is in the trie: non-empty, not special, not a stop id, inside the vocabulary.
  bool is_grammar_token(int32_t id) const { return id >= 0 && id < size() && grammar_token_[id]; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  /// [begin, end) into trie_tokens() of node i (empty unless trie()[i].has_tokens).
  std::pair<int32_t, int32_t> token_range(size_t i) const { return {token_begin_[i], token_end_[i]}; }
  /// Index of grammar token `id` in trie_tokens() (byte-lexicographic order), -1 for others:
  /// sorting ids by it puts tokens sharing a prefix next to each other.
  int32_t trie_rank(int32_t id) const { return id >= 0 && id < size() ? trie_rank_[id] : -1; }
  int32_t max_token_bytes() const { return max_depth_; }
  /// A hash of all of the above, part of the grammar cache key.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> stop_ids_;
  std::vector<uint8_t> grammar_token_;
  int32_t rows_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  std::vector<int32_t> trie_rank_;  // per id: index in trie_tokens_, -1 outside the trie
  std::vector<int32_t> token_begin_, token_end_;  // per trie node
  int32_t max_depth_ = 0;
  uint64_t fingerprint_ = 0;
};

}  // namespace qs::constrained
