// GBNF grammars, the `grammar` syntax of llama.cpp's server (grammars/README.md there), parsed
// into GrammarBuilder rules. Written from the syntax description, not from llama.cpp's code.
//
//   root   ::= "{" ws pair (ws "," ws pair)* ws "}"     # rules: name ::= alternatives
//   pair   ::= [a-z]+ ":" ( "true" | [0-9]{1,3} )      # literals, classes, groups, rule refs
//   ws     ::= [ \t\n]*                                # * + ? {m} {m,} {m,n}
//
// Literals "..." and classes [...] / [^...] take the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH
// \UHHHHHHHH; classes and `.` are over Unicode code points (UTF-8 in the output). Names are
// [A-Za-z0-9_-]+; `#` starts a comment; newlines end a rule except inside parentheses or after
// `|`, and a line starting with `|` continues the previous rule. The start rule is `root`.
// Token references (<...>) are not supported. Left-recursive rules are rejected by
// GrammarBuilder::build().
#pragma once

#include <cstdint>
#include <string_view>

#include "constrained/grammar.h"

namespace qs::constrained {

/// Adds the rules of `text` and returns the id of `root`. Throws qs::Error ("grammar: ... at line
/// L column C") on syntax errors, duplicate or undefined rules and a missing root.
int32_t add_gbnf(GrammarBuilder& builder, std::string_view text, int64_t max_repeat = 10000);

}  // namespace qs::constrained
