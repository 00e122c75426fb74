#include "tokenizer/added_tokens.h"

#include <algorithm>

namespace qs::tokenizer_detail {

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens) {
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    auto& bucket = by_first_byte_[static_cast<uint8_t>(token.content[0])];
    const auto same = std::find_if(bucket.begin(), bucket.end(),
                                   [&](const auto& c) { return c.first == token.content; });
    if (same != bucket.end()) {
      same->second = token.id;
    } else {
      bucket.emplace_back(token.content, token.id);
    }
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [](const auto& a, const auto& b) {
      return a.first.size() > b.first.size();
    });
  }
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text,
                                                                size_t from) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    const auto& bucket = by_first_byte_[static_cast<uint8_t>(text[pos])];
    for (const auto& [content, id] : bucket) {
      if (text.compare(pos, content.size(), content) == 0) {
        return Match{pos, content.size(), id};
      }
    }
  }
  return std::nullopt;
}

}  // namespace qs::tokenizer_detail
