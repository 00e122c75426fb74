#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace qs {
namespace {

// Largest id accepted anywhere; guards against absurd allocations from corrupt inputs.
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

std::optional<int32_t> checked_special_id(std::optional<int32_t> id, size_t vocab_size,
                                          const char* what) {
  if (id && (*id < 0 || static_cast<size_t>(*id) >= vocab_size)) {
    throw Error(std::string("tokenizer: ") + what + " id " + std::to_string(*id) +
                " outside the vocabulary (size " + std::to_string(vocab_size) + ")");
  }
  return id;
}

}  // namespace

Tokenizer::Tokenizer(TokenizerData data) : normalize_nfc_(data.normalize_nfc) {
  size_t size = data.vocab.size();
  for (const AddedToken& token : data.added_tokens) {
    if (token.id < 0 || token.id >= kMaxVocabSize || token.content.empty()) {
      throw Error("tokenizer: added token '" + token.content + "' has invalid id " +
                  std::to_string(token.id) + " or empty content");
    }
    size = std::max(size, static_cast<size_t>(token.id) + 1);
  }
  if (static_cast<int64_t>(size) > kMaxVocabSize) {
    throw Error("tokenizer: vocabulary of " + std::to_string(size) + " tokens is too large");
  }
  token_bytes_.resize(size);
  special_.assign(size, false);
  for (size_t id = 0; id < data.vocab.size(); ++id) {
    const std::string& token = data.vocab[id];
    // Like HF's ByteLevel decoder: a token outside the byte-level alphabet decodes as itself.
    if (!tokenizer_detail::byte_level_to_bytes(token, token_bytes_[id])) token_bytes_[id] = token;
  }
  for (const AddedToken& token : data.added_tokens) {
    token_bytes_[token.id] = token.content;
    special_[token.id] = token.special;
    added_ids_[token.content] = token.id;
  }
  bos_id_ = checked_special_id(data.bos_id, size, "bos");
  eos_id_ = checked_special_id(data.eos_id, size, "eos");
  pad_id_ = checked_special_id(data.pad_id, size, "pad");
  added_matcher_ = std::make_unique<tokenizer_detail::AddedTokenMatcher>(data.added_tokens);
  splitter_ = std::make_unique<tokenizer_detail::RegexSplitter>(
      data.split_regex.empty() ? tokenizer_detail::kQwen2SplitRegex
                               : std::string_view(data.split_regex));
  bpe_ = std::make_unique<tokenizer_detail::BpeModel>(data.vocab, data.merges);
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string normalized;
  if (normalize_nfc_) {
    normalized = tokenizer_detail::nfc_normalize(text);
    text = normalized;
  }
  for (const std::string_view piece : splitter_->split(text)) bpe_->encode_piece(piece, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::string repaired;
  if (!tokenizer_detail::utf8_is_valid(text)) {
    repaired = tokenizer_detail::utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    const auto match = added_matcher_->find(text, pos);
    const size_t segment_end = match ? match->pos : text.size();
    encode_segment(text.substr(pos, segment_end - pos), ids);
    if (!match) break;
    ids.push_back(match->id);
    pos = match->pos + match->length;
  }
  return ids;
}

const std::string& Tokenizer::checked_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " outside the vocabulary (size " +
                std::to_string(vocab_size()) + ")");
  }
  return token_bytes_[static_cast<size_t>(id)];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const int32_t id : ids) {
    const std::string& token = checked_bytes(id);
    if (skip_special && special_[static_cast<size_t>(id)]) continue;
    bytes += token;
  }
  return tokenizer_detail::utf8_lossy(bytes);
}

std::string Tokenizer::token_bytes(int32_t id) const { return checked_bytes(id); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view content) const {
  const auto it = added_ids_.find(std::string(content));
  if (it != added_ids_.end()) return it->second;
  return bpe_->find(content);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)];
}

}  // namespace qs
