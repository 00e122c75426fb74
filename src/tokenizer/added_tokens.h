// Finds added tokens (e.g. "<|im_start|>") in raw text: leftmost match first, longest among
// matches starting at the same byte, as Hugging Face's added-vocabulary split does.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace qs::tokenizer_detail {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t pos;     // byte offset in the searched text
    size_t length;  // bytes
    int32_t id;
  };

  /// Tokens with empty content are ignored. For equal contents the later token wins.
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens);

  /// First match at or after byte `from` of `text`, or nullopt.
  std::optional<Match> find(std::string_view text, size_t from) const;

 private:
  // Candidates per first byte, longest content first.
  std::array<std::vector<std::pair<std::string, int32_t>>, 256> by_first_byte_;
};

}  // namespace qs::tokenizer_detail
