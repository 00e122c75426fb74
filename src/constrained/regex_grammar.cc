#include "constrained/regex_grammar.h"

#include <string>

#include "core/error.h"

namespace qs::constrained {

namespace {

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view p, RegexMode mode, int64_t max_repeat)
      : b_(b), p_(p), mode_(mode), max_repeat_(max_repeat), chars_(b, mode == RegexMode::kJsonString) {}

  int32_t parse_top() {
    std::vector<Sequence> alts;
    do {
      Sequence seq;
      const bool anchored_start = eat('^');
      if (!anchored_start && mode_ == RegexMode::kJsonString) seq.push_back(any_star());
      Sequence body = parse_concat(true);
      append(seq, body);
      const bool anchored_end = end_anchor_;
      end_anchor_ = false;
      if (!anchored_end && mode_ == RegexMode::kJsonString) seq.push_back(any_star());
      alts.push_back(std::move(seq));
    } while (eat('|'));
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    return b_.add_rule("regex", std::move(alts));
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("regex: " + what + " at offset " + std::to_string(i_) + " in '" + std::string(p_) + "'");
  }
  bool eat(char c) {
    if (i_ < p_.size() && p_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Symbol any_star() {
    if (any_star_ < 0) any_star_ = b_.star({chars_.any_json_string_char()}).rule;
    return Symbol::ref(any_star_);
  }

  Symbol parse_alt() {
    std::vector<Sequence> alts;
    do {
      alts.push_back(parse_concat(false));
    } while (eat('|'));
    if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
    return b_.alt(std::move(alts), "group");
  }

  Sequence parse_concat(bool top) {
    Sequence seq;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        ++i_;
        if (top && (i_ == p_.size() || p_[i_] == '|')) {
          end_anchor_ = true;
          break;
        }
        fail("'$' is only supported at the end of the pattern");
      }
      if (p_[i_] == '^') fail("'^' is only supported at the start of the pattern");
      Sequence atom = parse_atom();
      parse_quantifiers(atom, seq);
    }
    return seq;
  }

  void parse_quantifiers(Sequence atom, Sequence& out) {
    for (;;) {
      int64_t min = 1, max = 1;
      if (eat('*')) {
        min = 0, max = -1;
      } else if (eat('+')) {
        min = 1, max = -1;
      } else if (eat('?')) {
        min = 0, max = 1;
      } else if (i_ < p_.size() && p_[i_] == '{' && is_brace_quantifier()) {
        ++i_;
        min = parse_int();
        max = min;
        if (eat(',')) max = (i_ < p_.size() && p_[i_] == '}') ? -1 : parse_int();
        if (!eat('}')) fail("expected '}'");
        if (max >= 0 && max < min) fail("quantifier {n,m} with m < n");
      } else {
        break;
      }
      eat('?');  // lazy: same language
      if (i_ < p_.size() && p_[i_] == '+') fail("possessive quantifiers are not supported");
      if (min > max_repeat_ || max > max_repeat_) fail("repetition count above the limit");
      atom = {min == 1 && max == 1 ? atom[0] : b_.alt({b_.repeat(atom, min, max, max_repeat_)}, "rep")};
    }
    append(out, atom);
  }

  bool is_brace_quantifier() const {
    size_t j = i_ + 1;
    if (j >= p_.size() || !isdigit(static_cast<unsigned char>(p_[j]))) return false;
    while (j < p_.size() && (isdigit(static_cast<unsigned char>(p_[j])) || p_[j] == ',')) ++j;
    return j < p_.size() && p_[j] == '}';
  }

  int64_t parse_int() {
    if (i_ >= p_.size() || !isdigit(static_cast<unsigned char>(p_[i_]))) fail("expected a number");
    int64_t v = 0;
    while (i_ < p_.size() && isdigit(static_cast<unsigned char>(p_[i_]))) {
      v = v * 10 + (p_[i_++] - '0');
      if (v > 1'000'000'000) fail("repetition count too large");
    }
    return v;
  }

  uint32_t next_codepoint() {
    const auto c = static_cast<unsigned char>(p_[i_]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i_ + len > p_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0x3F >> (len - 1));
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(p_[i_ + k]);
      if ((cc >> 6) != 2) fail("invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    i_ += len;
    return cp;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= p_.size() || !isxdigit(static_cast<unsigned char>(p_[i_]))) fail("expected a hex digit");
      v = v * 16 + static_cast<uint32_t>(std::stoi(std::string(1, p_[i_++]), nullptr, 16));
    }
    return v;
  }

  /// An escape after '\': fills `set`; returns false when it is a class escape (\d...) so that a
  /// range cannot use it as an end point.
  bool parse_escape(CodepointSet& set, bool in_class) {
    if (i_ >= p_.size()) fail("pattern ends with '\\'");
    const char c = p_[i_++];
    auto single = [&](uint32_t cp) { set.add(cp, cp); return true; };
    switch (c) {
      case 'd': set.add(CodepointSet::digits()); return false;
      case 'D': set.add(CodepointSet::digits().complement()); return false;
      case 'w': set.add(CodepointSet::word()); return false;
      case 'W': set.add(CodepointSet::word().complement()); return false;
      case 's': set.add(CodepointSet::space()); return false;
      case 'S': set.add(CodepointSet::space().complement()); return false;
      case 't': return single('\t');
      case 'n': return single('\n');
      case 'r': return single('\r');
      case 'f': return single('\f');
      case 'v': return single('\v');
      case '0': return single(0);
      case 'x': return single(parse_hex(2));
      case 'u':
        if (eat('{')) {
          uint32_t v = 0;
          int n = 0;
          while (i_ < p_.size() && p_[i_] != '}' && n < 7) v = v * 16 + parse_hex(1), ++n;
          if (!eat('}') || n == 0 || v > kMaxCodepoint) fail("bad \\u{...} escape");
          return single(v);
        }
        return single(parse_hex(4));
      case 'b':
        if (in_class) return single('\b');
        fail("word boundaries (\\b) are not supported");
      case 'B': fail("word boundaries (\\B) are not supported");
      default:
        if (isdigit(static_cast<unsigned char>(c))) fail("backreferences are not supported");
        if (isalnum(static_cast<unsigned char>(c))) fail(std::string("unknown escape \\") + c);
        --i_;
        return single(next_codepoint());
    }
  }

  Sequence parse_atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (eat('?')) {
        if (eat(':')) {
        } else if (i_ < p_.size() && p_[i_] == '<' && i_ + 1 < p_.size() && p_[i_ + 1] != '=' &&
                   p_[i_ + 1] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;
          if (!eat('>')) fail("unterminated group name");
        } else {
          fail("lookaround and inline flags are not supported");
        }
      }
      if (++nesting_ > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting));
      Symbol inner = parse_alt();
      --nesting_;
      if (!eat(')')) fail("missing ')'");
      return {inner};
    }
    if (c == '[') return {parse_class()};
    if (c == '.') {
      ++i_;
      return {chars_.one_of(CodepointSet::any_but_newline())};
    }
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '{' && is_brace_quantifier()) fail("nothing to repeat");
    CodepointSet set;
    if (c == '\\') {
      ++i_;
      parse_escape(set, false);
    } else {
      const uint32_t cp = next_codepoint();
      set.add(cp, cp);
    }
    return {chars_.one_of(set)};
  }

  Symbol parse_class() {
    ++i_;  // '['
    const bool negate = eat('^');
    CodepointSet set;
    while (i_ < p_.size() && p_[i_] != ']') {
      CodepointSet lo_set;
      bool lo_single = true;
      uint32_t lo = 0;
      if (p_[i_] == '\\') {
        ++i_;
        lo_single = parse_escape(lo_set, true);
        if (lo_single) lo = lo_set.ranges()[0].first;
      } else {
        lo = next_codepoint();
      }
      if (lo_single && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (p_[i_] == '\\') {
          ++i_;
          CodepointSet hi_set;
          if (!parse_escape(hi_set, true)) fail("class escape as a range end");
          hi = hi_set.ranges()[0].first;
        } else {
          hi = next_codepoint();
        }
        if (hi < lo) fail("range out of order in character class");
        set.add(lo, hi);
      } else if (lo_single) {
        set.add(lo, lo);
      } else {
        set.add(lo_set);
      }
    }
    if (!eat(']')) fail("missing ']'");
    if (negate) set = set.complement();
    if (set.empty()) fail("character class matches nothing");
    return chars_.one_of(set);
  }

  GrammarBuilder& b_;
  std::string_view p_;
  RegexMode mode_;
  int64_t max_repeat_;
  CharEmitter chars_;
  static constexpr int kMaxNesting = 200;
  size_t i_ = 0;
  int nesting_ = 0;
  bool end_anchor_ = false;
  int32_t any_star_ = -1;
};

}  // namespace

int32_t add_regex(GrammarBuilder& builder, std::string_view pattern, RegexMode mode,
                  int64_t max_repeat) {
  RegexParser parser(builder, pattern, mode, max_repeat);
  return parser.parse_top();
}

}  // namespace qs::constrained
