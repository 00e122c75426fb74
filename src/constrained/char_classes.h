// Sets of Unicode code points and their byte-level grammar form: raw UTF-8, or as the characters
// of a JSON string (with `"`, `\` and control characters written as escapes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "constrained/grammar.h"

namespace qs::constrained {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

/// A set of code points as sorted, disjoint, non-adjacent inclusive ranges (surrogates
/// U+D800..U+DFFF are never part of a set: they have no UTF-8 form).
class CodepointSet {
 public:
  void add(uint32_t lo, uint32_t hi);
  void add(const CodepointSet& other);
  CodepointSet complement() const;
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

  static CodepointSet digits();      // [0-9]
  static CodepointSet word();        // [A-Za-z0-9_]
  static CodepointSet space();       // JavaScript \s
  static CodepointSet any_but_newline();  // JavaScript '.': all but \n \r U+2028 U+2029

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

/// UTF-8 bytes of `cp` (cp <= 0x10FFFF, not a surrogate).
std::string utf8_encode(uint32_t cp);

/// The byte sequences that spell the code points lo..hi in UTF-8, as grammar alternatives
/// (the range-splitting construction of RE2 / Russ Cox's utf8 ranges, written from scratch).
std::vector<Sequence> utf8_range_sequences(uint32_t lo, uint32_t hi);

/// Emits one character from a code point set as a grammar symbol.
class CharEmitter {
 public:
  /// `json_escape`: characters appear inside a JSON string: `"` as \", `\` as \\, U+0000..U+001F
  /// as \b \f \n \r \t or \u00XX (lowercase hex); everything else raw UTF-8.
  CharEmitter(GrammarBuilder& builder, bool json_escape) : b_(builder), json_(json_escape) {}

  /// One character of `set`. Throws qs::Error if the set is empty.
  Symbol one_of(const CodepointSet& set);
  /// One character of a JSON string in any valid spelling: unescaped characters other than `"`,
  /// `\` and controls, the two-character escapes, and \uXXXX outside the surrogate range. Shared
  /// rule, created on first use.
  Symbol any_json_string_char();

 private:
  GrammarBuilder& b_;
  bool json_;
  int32_t json_char_rule_ = -1;
};

}  // namespace qs::constrained
