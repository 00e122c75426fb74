// Byte-level context-free grammars: the one intermediate form every constrained-decoding source
// (JSON Schema, json_object, regular expression, choices, GBNF) is compiled into.
//
// A grammar is a set of rules; a rule is a list of alternatives; an alternative is a sequence of
// symbols, each either a set of bytes (one input byte from the set) or a reference to a rule.
// GrammarBuilder collects rules (with helpers for literals, optional parts and bounded or
// unbounded repetition, which become right-recursive helper rules, or a counted repetition node
// for a large bound on a one-character body), then build() checks and
// flattens them into a Grammar: every alternative becomes a run of Elements ending in kEnd, so a
// parser position is one int32 index into Grammar::elements (the layout llama.cpp's GBNF engine
// uses; the code here is our own).
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "constrained/byte_set.h"

namespace qs::constrained {

/// One grammar symbol: a byte set (rule < 0), a reference to rule `rule` (repeat < 0), or a
/// counted repetition rule{min,max} of a terminal rule (repeat >= 0: index of the builder's
/// bounds; see GrammarBuilder::repeat).
struct Symbol {
  int32_t rule = -1;
  ByteSet bytes;
  int32_t repeat = -1;

  static Symbol ref(int32_t r) { return Symbol{r, {}}; }
  static Symbol set(const ByteSet& b) { return Symbol{-1, b}; }
  static Symbol byte(uint8_t b) { return Symbol{-1, ByteSet::of(b)}; }
};
using Sequence = std::vector<Symbol>;

/// Appends `more` to `seq`.
void append(Sequence& seq, const Sequence& more);

struct Element {
  enum class Kind : uint8_t { kBytes, kRule, kEnd, kRepeat };
  Kind kind;
  int32_t arg;   // kBytes: index into Grammar::sets; kRule: the referenced rule; kEnd: -1;
                 // kRepeat: index into Grammar::repeats
  int32_t rule;  // the rule this element belongs to
};

/// A counted repetition body{min,max}: the parser keeps the number of completed iterations in
/// the stack frame of the kRepeat element (as XGrammar / llguidance do for bounded repeats), so
/// the grammar and its mask cache do not grow with the bound. `body` is a terminal rule (byte
/// sets only, every alternative non-empty) called from this element only.
struct Repeat {
  int32_t body;
  int32_t min;
  int32_t max;  // kUnbounded: no upper bound
  static constexpr int32_t kUnbounded = INT32_MAX;
};

/// A checked, flattened grammar. Invariants established by GrammarBuilder::build(): every rule
/// reachable from `root` is defined and productive (derives some finite byte string), so every
/// parser position can still be completed; no rule is left-recursive.
struct Grammar {
  std::vector<Element> elements;
  std::vector<ByteSet> sets;
  std::vector<std::vector<int32_t>> alternatives;  // rule -> first element of each alternative
  std::vector<std::string> rule_names;
  /// rule -> the non-kEnd positions that may follow a completed call of the rule, through chains
  /// of calls in tail position (an over-approximation of the context, used by the mask cache).
  std::vector<std::vector<int32_t>> return_positions;
  /// rule -> completing the rule may complete the whole grammar (root, or tail-called by it).
  std::vector<uint8_t> can_end;
  std::vector<Repeat> repeats;
  /// rule -> the position of the kRepeat element whose body it is, or -1.
  std::vector<int32_t> repeat_of_body;
  int32_t root = 0;
};

class GrammarBuilder {
 public:
  /// `max_symbols`: compile limit on the total number of symbols; define() throws qs::Error once
  /// it is exceeded (a hostile schema becomes an error, not an out-of-memory).
  explicit GrammarBuilder(size_t max_symbols = 2'000'000) : max_symbols_(max_symbols) {}

  /// A new rule without alternatives yet (define it later; build() rejects undefined rules).
  int32_t declare(std::string name);
  /// Sets the alternatives of a declared rule. Throws qs::Error if it is already defined.
  void define(int32_t rule, std::vector<Sequence> alternatives);
  int32_t add_rule(std::string name, std::vector<Sequence> alternatives) {
    const int32_t r = declare(std::move(name));
    define(r, std::move(alternatives));
    return r;
  }
  bool is_defined(int32_t rule) const { return defined_[rule]; }
  const std::string& name(int32_t rule) const { return names_[rule]; }
  size_t rule_count() const { return names_.size(); }

  /// The bytes of `text` as a sequence of single-byte sets.
  static Sequence literal(std::string_view text);
  /// A reference to a new rule with the given alternatives.
  Symbol alt(std::vector<Sequence> alternatives, const char* name = "alt");
  /// body? / body* / body+ as references to new right-recursive rules.
  Symbol opt(Sequence body);
  Symbol star(Sequence body);
  Symbol plus(Sequence body);
  /// body{min,max} (max < 0: unbounded) as a sequence. A one-character body (a byte set or a
  /// defined terminal rule: byte sets only, no empty alternative) with a bound above
  /// kCountedFrom becomes one counted repetition node (Grammar::repeats; its size and compile
  /// cost do not depend on the bound); otherwise min copies, then a chain of optional ones.
  /// Throws qs::Error when min or max exceed `max_count`.
  Sequence repeat(const Sequence& body, int64_t min, int64_t max, int64_t max_count = 100000);
  static constexpr int64_t kCountedFrom = 8;

  /// Checks and flattens the rules reachable from `root`. Throws qs::Error naming the rule for an
  /// undefined rule, left recursion, or a root that derives no finite string; alternatives that
  /// can never complete (through unproductive rules or empty byte sets) are dropped.
  Grammar build(int32_t root) const;

 private:
  size_t max_symbols_;
  size_t symbols_ = 0;
  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> rules_;
  std::vector<bool> defined_;
  std::map<int32_t, std::vector<Symbol>> opt_chains_;  // repeat(): optional chains per body rule
  std::vector<std::pair<int32_t, int32_t>> repeat_bounds_;  // Symbol::repeat -> (min, max)
  std::map<std::tuple<int32_t, std::array<uint64_t, 4>, int64_t, int64_t>, Symbol> counted_;  // shared nodes
};

}  // namespace qs::constrained
