// Byte-level BPE model: merges adjacent symbols by merge rank (lowest rank first, leftmost first
// among equal ranks), exactly as Hugging Face's BPE model with no dropout, no unk token and no
// continuing-subword prefix or end-of-word suffix.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace qs::tokenizer_detail {

/// Hash for unordered_map<std::string, ...> that also accepts std::string_view keys.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class BpeModel {
 public:
  /// `vocab`: id -> token in byte-level spelling (empty = no token). `merges`: pairs of tokens in
  /// rank order; a later duplicate of a pair overrides the earlier one, as in Hugging Face.
  /// Throws qs::Error when a merge names a token, or produces a token, missing from `vocab`.
  BpeModel(const std::vector<std::string>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges);

  /// Appends the ids of one pre-tokenized piece, given as raw bytes (not byte-level spelled).
  /// Bytes whose byte-level character is not in the vocabulary are dropped (HF without unk).
  /// Thread-safe; results for pieces under 256 bytes are cached.
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

  /// Id of a token in byte-level spelling.
  std::optional<int32_t> find(std::string_view token) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // id of the merged token
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Merge* find_merge(int32_t left, int32_t right) const;
  void merge_word(std::vector<int32_t>& symbols) const;

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_ids_;
  std::array<int32_t, 256> byte_ids_{};  // id of each single-byte token, -1 if absent
  std::unordered_map<uint64_t, Merge> merges_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>
      cache_;
};

}  // namespace qs::tokenizer_detail
