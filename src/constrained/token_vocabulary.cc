#include "constrained/token_vocabulary.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace qs::constrained {

namespace {

uint64_t fnv(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

}  // namespace

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes,
                                 std::vector<int32_t> stop_ids,
                                 const std::vector<int32_t>& never_ids, int32_t rows)
    : bytes_(std::move(token_bytes)), stop_ids_(std::move(stop_ids)), rows_(rows) {
  if (rows_ <= 0) throw Error("logits rows must be positive");
  if (rows_ < static_cast<int32_t>(bytes_.size())) {
    throw Error("logits rows " + std::to_string(rows_) + " are fewer than the " +
                std::to_string(bytes_.size()) + " tokens of the vocabulary");
  }
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());
  for (int32_t id : stop_ids_) {
    if (id < 0 || id >= rows_) throw Error("stop token id " + std::to_string(id) + " out of range");
  }
  std::vector<bool> excluded(bytes_.size(), false);
  for (int32_t id : never_ids) {
    if (id >= 0 && id < size()) excluded[id] = true;
  }
  for (int32_t id : stop_ids_) {
    if (id < size()) excluded[id] = true;
  }
  std::vector<int32_t> ids;
  grammar_token_.assign(bytes_.size(), 0);
  for (int32_t id = 0; id < size(); ++id) {
    if (!excluded[id] && !bytes_[id].empty() && bytes_[id].size() <= kMaxTokenBytes) {
      ids.push_back(id);
      grammar_token_[id] = 1;
    }
  }
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  // Preorder trie from the sorted token strings: `path` holds the open nodes of the last string.
  std::vector<int32_t> path;
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = bytes_[id];
    size_t common = 0;
    if (prev != nullptr) {
      while (common < prev->size() && common < s.size() && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() > common) {
      trie_[path.back()].skip = static_cast<int32_t>(trie_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(trie_.size()));
      trie_.push_back({static_cast<uint8_t>(s[d]), static_cast<uint8_t>(d + 1), 0, 0, -1});
      token_begin_.push_back(0);
      token_end_.push_back(0);
    }
    const size_t last = static_cast<size_t>(path.back());
    if (!trie_[last].has_tokens) token_begin_[last] = static_cast<int32_t>(trie_tokens_.size());
    trie_[last].has_tokens = 1;
    token_end_[last] = static_cast<int32_t>(trie_tokens_.size()) + 1;
    trie_tokens_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(s.size()));
    prev = &s;
  }
  while (!path.empty()) {
    trie_[path.back()].skip = static_cast<int32_t>(trie_.size());
    path.pop_back();
  }
  trie_rank_.assign(bytes_.size(), -1);
  for (size_t i = 0; i < trie_tokens_.size(); ++i) trie_rank_[static_cast<size_t>(trie_tokens_[i])] = static_cast<int32_t>(i);
  uint64_t h = 1469598103934665603ULL;
  for (const auto& b : bytes_) {
    const uint64_t n = b.size();
    h = fnv(fnv(h, &n, sizeof n), b.data(), b.size());
  }
  h = fnv(h, stop_ids_.data(), stop_ids_.size() * sizeof(int32_t));
  h = fnv(h, ids.data(), ids.size() * sizeof(int32_t));
  fingerprint_ = fnv(h, &rows_, sizeof rows_);
}

bool TokenVocabulary::is_stop(int32_t id) const {
  return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id);
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(
    const Tokenizer& tokenizer, int32_t rows, std::vector<int32_t> stop_ids) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  std::vector<int32_t> never;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id)) {
      never.push_back(id);
      continue;
    }
    bytes[id] = tokenizer.token_bytes(id);
  }
  if (stop_ids.empty() && tokenizer.eos_id()) stop_ids.push_back(*tokenizer.eos_id());
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(stop_ids), never,
                                                 rows);
}

}  // namespace qs::constrained
