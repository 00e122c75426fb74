// Regular expressions (a documented subset of ECMAScript syntax) as grammar rules.
//
// Supported: literals (UTF-8), `.` (any character but \n \r U+2028 U+2029), classes `[...]` and
// `[^...]` with ranges, escapes \d \D \w \W \s \S \t \n \r \f \v \0 \xHH \uHHHH \u{H...} and
// escaped punctuation, groups `(...)`, `(?:...)`, `(?<name>...)`, alternation `|`, quantifiers
// `*` `+` `?` `{n}` `{n,}` `{n,m}` (a lazy `?` suffix is accepted and changes nothing), `^` at the
// start and `$` at the end of a top-level alternative. Not supported (qs::Error naming the
// construct): backreferences, lookaround, word boundaries \b \B, possessive quantifiers, flags,
// anchors elsewhere.
#pragma once

#include <cstdint>
#include <string_view>

#include "constrained/char_classes.h"
#include "constrained/grammar.h"

namespace qs::constrained {

enum class RegexMode {
  /// The whole output must match (anchors optional): vLLM's `regex` / `structured_outputs.regex`.
  kRaw,
  /// JSON Schema `pattern`: the rule produces the characters between the quotes of a JSON string
  /// (escaped as JSON), and the pattern is searched, not anchored: an alternative without `^`
  /// may be preceded, one without `$` followed, by any characters.
  kJsonString,
};

/// Adds a rule matching `pattern` and returns its id. `max_repeat` bounds {n,m}. Throws qs::Error
/// ("regex: ... at offset N") on syntax errors and unsupported constructs.
int32_t add_regex(GrammarBuilder& builder, std::string_view pattern, RegexMode mode,
                  int64_t max_repeat = 10000);

}  // namespace qs::constrained
