// Byte-level BPE tokenizer, equal to Hugging Face `tokenizers` for Qwen2/Qwen2.5/Qwen3.
//
// Encoding (HF order): added tokens are matched first wherever their literal appears (leftmost,
// longest), the text between them is NFC-normalized, split by the pre-tokenizer regex (PCRE2),
// spelled in the GPT-2 byte-level alphabet and merged by BPE rank. Decoding concatenates token
// bytes and replaces invalid UTF-8 with U+FFFD (HF's errors='replace').
//
// Sources of TokenizerData: load_tokenizer_json (HF tokenizer.json) or tokenizer_data_from_gguf
// (the tokenizer.ggml.* arrays llama.cpp's converter writes for tokenizer.ggml.model "gpt2").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace qs {

namespace tokenizer_detail {
class BpeModel;
class RegexSplitter;
class AddedTokenMatcher;
}  // namespace tokenizer_detail

/// A token matched whole in the input before normalization and BPE (e.g. "<|im_start|>").
struct AddedToken {
  int32_t id;
  std::string content;  // literal UTF-8 text
  bool special;         // skipped by decode(..., skip_special=true)
};

struct TokenizerData {
  /// id -> token in byte-level (GPT-2 bytes-to-unicode) spelling; ids without a token are empty.
  std::vector<std::string> vocab;
  /// Merge pairs in rank order (rank 0 first), byte-level spelling.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  std::optional<int32_t> bos_id, eos_id, pad_id;
  /// Pre-tokenizer split pattern in Hugging Face (Oniguruma) syntax; empty = the Qwen2 pattern.
  std::string split_regex;
  /// Apply Unicode NFC to text outside added tokens (Qwen's normalizer).
  bool normalize_nfc = true;
};

/// Reads a Hugging Face tokenizer.json (model.vocab, model.merges as ["a","b"] or "a b",
/// added_tokens, the Split regex, the NFC normalizer) and, when a tokenizer_config.json sits next
/// to it, its bos_token / eos_token / pad_token. Throws qs::Error naming the file when it cannot
/// be read, is not JSON, is not a BPE model with ByteLevel pre-tokenizer and decoder, or uses a
/// setting this tokenizer does not implement (dropout, byte_fallback, other normalizers...).
TokenizerData load_tokenizer_json(const std::string& path);

/// Builds TokenizerData from GGUF metadata: tokenizer.ggml.tokens, .merges ("a b"), .token_type
/// (1 normal, 2 unknown, 3 control, 4 user_defined, 5 unused, 6 byte; empty = all normal) and the
/// bos/eos/padding ids. Control tokens become special added tokens, user-defined ones non-special
/// added tokens, unused ones are left empty. Uses the Qwen2 split regex and NFC, matching HF
/// (tokenizer.ggml.pre "qwen2"). Throws qs::Error on mismatched array sizes, unknown token types,
/// malformed merges or out-of-range special ids.
TokenizerData tokenizer_data_from_gguf(std::vector<std::string> tokens,
                                       std::vector<std::string> merges,
                                       std::vector<int64_t> token_types,
                                       std::optional<int32_t> bos, std::optional<int32_t> eos,
                                       std::optional<int32_t> pad);

class Tokenizer {
 public:
  /// Builds the tokenizer. Throws qs::Error on an invalid regex, merges naming unknown tokens,
  /// negative or empty added tokens, or bos/eos/pad ids outside the vocabulary.
  explicit Tokenizer(TokenizerData data);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  /// Token ids of UTF-8 `text` (no BOS/EOS added). Invalid UTF-8 is first replaced by U+FFFD.
  /// Thread-safe.
  std::vector<int32_t> encode(std::string_view text) const;
  /// UTF-8 text of `ids`; special added tokens are dropped when `skip_special`. Invalid byte
  /// sequences become U+FFFD. Throws qs::Error on an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  /// Raw bytes of one token (may be part of a UTF-8 character). Throws qs::Error when out of range.
  std::string token_bytes(int32_t id) const;
  /// Id of a token by its vocabulary spelling (byte-level, e.g. "Ġthe") or added-token content.
  std::optional<int32_t> token_to_id(std::string_view content) const;
  /// True for special added tokens; false for every other id, including out-of-range ones.
  bool is_special(int32_t id) const;
  /// One past the largest id (vocabulary and added tokens).
  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  std::optional<int32_t> pad_id() const { return pad_id_; }

 private:
  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
  const std::string& checked_bytes(int32_t id) const;

  std::vector<std::string> token_bytes_;  // id -> raw bytes
  std::vector<bool> special_;             // id -> special added token
  std::unordered_map<std::string, int32_t> added_ids_;
  std::unique_ptr<tokenizer_detail::AddedTokenMatcher> added_matcher_;
  std::unique_ptr<tokenizer_detail::RegexSplitter> splitter_;
  std::unique_ptr<tokenizer_detail::BpeModel> bpe_;
  bool normalize_nfc_ = true;
  std::optional<int32_t> bos_id_, eos_id_, pad_id_;
};

}  // namespace qs
