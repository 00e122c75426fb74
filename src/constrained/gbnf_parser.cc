#include "constrained/gbnf_parser.h"

#include <map>
#include <string>

#include "constrained/char_classes.h"
#include "core/error.h"

namespace qs::constrained {

namespace {

bool is_name_char(char c) {
  return isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(GrammarBuilder& b, std::string_view t, int64_t max_repeat)
      : b_(b), t_(t), max_repeat_(max_repeat), chars_(b, false) {}

  int32_t parse() {
    for (;;) {
      skip(true);
      if (i_ >= t_.size()) break;
      const std::string name = parse_name();
      skip(false);
      if (t_.substr(i_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      const int32_t r = rule_id(name);
      if (b_.is_defined(r)) fail("rule '" + name + "' is defined twice");
      b_.define(r, parse_alternatives(false));
      skip(false);
      if (i_ < t_.size() && t_[i_] != '\n' && t_[i_] != '\r') fail("unexpected character");
    }
    for (const auto& [name, id] : ids_) {
      if (!b_.is_defined(id)) throw Error("grammar: rule '" + name + "' is used but not defined");
    }
    auto it = ids_.find("root");
    if (it == ids_.end()) throw Error("grammar: no 'root' rule");
    return it->second;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) {
      if (t_[k] == '\n') ++line, col = 1;
      else ++col;
    }
    throw Error("grammar: " + what + " at line " + std::to_string(line) + " column " +
                std::to_string(col));
  }

  /// Skips blanks and comments; newlines too when `newlines`.
  void skip(bool newlines) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++i_;
      } else {
        break;
      }
    }
  }

  /// True when, after blank lines and comments, the next line starts with '|'.
  bool continues_on_next_line() {
    size_t save = i_;
    skip(true);
    if (i_ < t_.size() && t_[i_] == '|') return true;
    i_ = save;
    return false;
  }

  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t r = b_.declare(name);
    ids_[name] = r;
    return r;
  }

  std::string parse_name() {
    const size_t start = i_;
    while (i_ < t_.size() && is_name_char(t_[i_])) ++i_;
    if (i_ == start) fail("expected a rule name");
    return std::string(t_.substr(start, i_ - start));
  }

  std::vector<Sequence> parse_alternatives(bool nested) {
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(nested));
    for (;;) {
      skip(nested);
      if (!nested && i_ < t_.size() && (t_[i_] == '\n' || t_[i_] == '\r')) {
        continues_on_next_line();  // moves to a '|' that starts the next line, if any
      }
      if (i_ < t_.size() && t_[i_] == '|') {
        ++i_;
        skip(true);
        alts.push_back(parse_sequence(nested));
      } else {
        break;
      }
    }
    return alts;
  }

  Sequence parse_sequence(bool nested) {
    Sequence seq;
    for (;;) {
      skip(nested);
      if (i_ >= t_.size()) break;
      const char c = t_[i_];
      Sequence atom;
      if (c == '"') {
        ++i_;
        std::string lit;
        while (i_ < t_.size() && t_[i_] != '"') {
          if (t_[i_] == '\n') fail("unterminated string literal");
          lit += utf8_encode(parse_char());
        }
        if (i_ >= t_.size()) fail("unterminated string literal");
        ++i_;
        atom = GrammarBuilder::literal(lit);
        if (atom.empty()) {
          seq_append_quantified(seq, Sequence{}, true);
          continue;
        }
        atom = {atom.size() == 1 ? atom[0] : b_.alt({atom}, "literal")};
      } else if (c == '[') {
        atom = {parse_class()};
      } else if (c == '.') {
        ++i_;
        CodepointSet all;
        all.add(0, kMaxCodepoint);
        atom = {chars_.one_of(all)};
      } else if (c == '(') {
        ++i_;
        if (++nesting_ > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting));
        std::vector<Sequence> alts = parse_alternatives(true);
        --nesting_;
        skip(true);
        if (i_ >= t_.size() || t_[i_] != ')') fail("missing ')'");
        ++i_;
        atom = {b_.alt(std::move(alts), "group")};
      } else if (c == '<') {
        fail("token references (<...>) are not supported");
      } else if (is_name_char(c)) {
        const size_t save = i_;
        const std::string name = parse_name();
        // A name followed by ::= starts the next rule (only possible after a newline).
        size_t j = i_;
        while (j < t_.size() && (t_[j] == ' ' || t_[j] == '\t')) ++j;
        if (t_.substr(j, 3) == "::=") {
          i_ = save;
          fail("missing newline before rule '" + name + "'");
        }
        atom = {Symbol::ref(rule_id(name))};
      } else {
        break;
      }
      seq_append_quantified(seq, std::move(atom), false);
    }
    return seq;
  }

  void seq_append_quantified(Sequence& seq, Sequence atom, bool empty_literal) {
    skip(false);
    int64_t min = 1, max = 1;
    if (i_ < t_.size() && t_[i_] == '*') {
      ++i_, min = 0, max = -1;
    } else if (i_ < t_.size() && t_[i_] == '+') {
      ++i_, min = 1, max = -1;
    } else if (i_ < t_.size() && t_[i_] == '?') {
      ++i_, min = 0, max = 1;
    } else if (i_ < t_.size() && t_[i_] == '{') {
      ++i_;
      skip(false);
      min = parse_int();
      skip(false);
      max = min;
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        skip(false);
        max = (i_ < t_.size() && t_[i_] == '}') ? -1 : parse_int();
        skip(false);
      }
      if (i_ >= t_.size() || t_[i_] != '}') fail("expected '}'");
      ++i_;
      if (max >= 0 && max < min) fail("repetition {m,n} with n < m");
    }
    if (empty_literal) return;
    if (min > max_repeat_ || max > max_repeat_) fail("repetition count above the limit");
    if (min == 1 && max == 1) {
      append(seq, atom);
    } else {
      seq.push_back(b_.alt({b_.repeat(atom, min, max, max_repeat_)}, "rep"));
    }
  }

  int64_t parse_int() {
    if (i_ >= t_.size() || !isdigit(static_cast<unsigned char>(t_[i_]))) fail("expected a number");
    int64_t v = 0;
    while (i_ < t_.size() && isdigit(static_cast<unsigned char>(t_[i_]))) {
      v = v * 10 + (t_[i_++] - '0');
      if (v > 1'000'000'000) fail("repetition count too large");
    }
    return v;
  }

  uint32_t parse_hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (i_ >= t_.size() || !isxdigit(static_cast<unsigned char>(t_[i_]))) fail("expected a hex digit");
      const char c = t_[i_++];
      v = v * 16 + static_cast<uint32_t>(isdigit(static_cast<unsigned char>(c)) ? c - '0' : (tolower(c) - 'a' + 10));
    }
    if (v > kMaxCodepoint) fail("code point out of range");
    return v;
  }

  /// One (possibly escaped) character of a literal or class, as a code point.
  uint32_t parse_char() {
    if (t_[i_] == '\\') {
      ++i_;
      if (i_ >= t_.size()) fail("unterminated escape");
      const char c = t_[i_++];
      switch (c) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return static_cast<uint8_t>(c);
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: fail(std::string("unknown escape \\") + c);
      }
    }
    const auto c = static_cast<unsigned char>(t_[i_]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i_ + len > t_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0x3F >> (len - 1));
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(t_[i_ + k]) & 0x3F);
    i_ += len;
    return cp;
  }

  Symbol parse_class() {
    ++i_;
    const bool negate = i_ < t_.size() && t_[i_] == '^';
    if (negate) ++i_;
    CodepointSet set;
    while (i_ < t_.size() && t_[i_] != ']') {
      if (t_[i_] == '\n') fail("unterminated character class");
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
        ++i_;
        hi = parse_char();
        if (hi < lo) fail("range out of order in character class");
      }
      set.add(lo, hi);
    }
    if (i_ >= t_.size()) fail("unterminated character class");
    ++i_;
    if (negate) set = set.complement();
    if (set.empty()) fail("character class matches nothing");
    return chars_.one_of(set);
  }

  GrammarBuilder& b_;
  std::string_view t_;
  int64_t max_repeat_;
  CharEmitter chars_;
  static constexpr int kMaxNesting = 200;
  size_t i_ = 0;
  int nesting_ = 0;
  std::map<std::string, int32_t> ids_;
};

}  // namespace

int32_t add_gbnf(GrammarBuilder& builder, std::string_view text, int64_t max_repeat) {
  GbnfParser p(builder, text, max_repeat);
  return p.parse();
}

}  // namespace qs::constrained
