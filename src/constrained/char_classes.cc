#include "constrained/char_classes.h"

#include <algorithm>

#include "core/error.h"

namespace qs::constrained {

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodepoint);
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) ranges_.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) ranges_.push_back({0xE000, hi});
  } else {
    ranges_.push_back({lo, hi});
  }
  normalize();
}

void CodepointSet::add(const CodepointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodepointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) out.add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.add(next, kMaxCodepoint);
  return out;
}

bool CodepointSet::contains(uint32_t cp) const {
  for (const auto& [lo, hi] : ranges_) {
    if (cp >= lo && cp <= hi) return true;
  }
  return false;
}

CodepointSet CodepointSet::digits() {
  CodepointSet s;
  s.add('0', '9');
  return s;
}

CodepointSet CodepointSet::word() {
  CodepointSet s;
  s.add('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_', '_');
  return s;
}

CodepointSet CodepointSet::space() {
  CodepointSet s;
  for (auto [lo, hi] : {std::pair<uint32_t, uint32_t>{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0},
                        {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                        {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}) {
    s.add(lo, hi);
  }
  return s;
}

CodepointSet CodepointSet::any_but_newline() {
  CodepointSet s;
  s.add('\n', '\n');
  s.add('\r', '\r');
  s.add(0x2028, 0x2029);
  return s.complement();
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

namespace {

void split_range(uint32_t lo, uint32_t hi, std::vector<Sequence>& out) {
  if (lo > hi) return;
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && hi > max) {
      split_range(lo, max, out);
      split_range(max + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    out.push_back({Symbol::set(ByteSet::range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)))});
    return;
  }
  // Same encoded length: split until every continuation byte below the first differing one
  // spans its full range 0x80..0xBF.
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_range(lo, lo | m, out);
        split_range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_range(lo, (hi & ~m) - 1, out);
        split_range(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  Sequence seq;
  for (size_t i = 0; i < a.size(); ++i) {
    seq.push_back(Symbol::set(ByteSet::range(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]))));
  }
  out.push_back(std::move(seq));
}

std::string json_escape_of(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: {
      static const char* hex = "0123456789abcdef";
      return std::string("\\u00") + hex[cp >> 4] + hex[cp & 15];
    }
  }
}

}  // namespace

std::vector<Sequence> utf8_range_sequences(uint32_t lo, uint32_t hi) {
  std::vector<Sequence> out;
  CodepointSet s;
  s.add(lo, hi);
  for (const auto& [a, b] : s.ranges()) split_range(a, b, out);
  return out;
}

Symbol CharEmitter::one_of(const CodepointSet& set) {
  if (set.empty()) throw Error("empty character class");
  std::vector<Sequence> alts;
  ByteSet single;  // all one-byte alternatives merged into one set
  for (const auto& [lo, hi] : set.ranges()) {
    uint32_t a = lo;
    if (json_) {
      // Escaped characters one by one, the rest as ranges.
      for (; a <= hi && (a < 0x20 || a == '"' || a == '\\'); ++a) {
        alts.push_back(GrammarBuilder::literal(json_escape_of(a)));
      }
      if (a > hi) continue;
      uint32_t end = hi;
      if (a < '"' && end >= '"') end = '"' - 1;
      else if (a < '\\' && end >= '\\') end = '\\' - 1;
      if (end < hi) {
        // Recurse over the pieces around the escaped character.
        CodepointSet left, right;
        left.add(a, end);
        right.add(end + 1, hi);
        for (const auto* part : {&left, &right}) {
          Symbol s = one_of(*part);
          alts.push_back({s});
        }
        continue;
      }
    }
    for (auto& seq : utf8_range_sequences(a, hi)) {
      if (seq.size() == 1) {
        single.add_all(seq[0].bytes);
      } else {
        alts.push_back(std::move(seq));
      }
    }
  }
  if (!single.empty()) alts.push_back({Symbol::set(single)});
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return b_.alt(std::move(alts), "char");
}

Symbol CharEmitter::any_json_string_char() {
  if (json_char_rule_ >= 0) return Symbol::ref(json_char_rule_);
  // Unescaped: U+0020 and above except '"' and '\\'.
  CodepointSet raw;
  raw.add(0x20, '"' - 1);
  raw.add('"' + 1, '\\' - 1);
  raw.add('\\' + 1, kMaxCodepoint);
  std::vector<Sequence> alts;
  ByteSet single;
  for (const auto& [lo, hi] : raw.ranges()) {
    for (auto& seq : utf8_range_sequences(lo, hi)) {
      if (seq.size() == 1) single.add_all(seq[0].bytes);
      else alts.push_back(std::move(seq));
    }
  }
  alts.push_back({Symbol::set(single)});
  ByteSet simple_escape;
  for (char c : std::string("\"\\/bfnrt")) simple_escape.add(static_cast<uint8_t>(c));
  alts.push_back({Symbol::byte('\\'), Symbol::set(simple_escape)});
  ByteSet hex, hex_no_d, d, oct;
  hex.add_range('0', '9'); hex.add_range('a', 'f'); hex.add_range('A', 'F');
  hex_no_d.add_range('0', '9'); hex_no_d.add_range('a', 'c'); hex_no_d.add_range('e', 'f');
  hex_no_d.add_range('A', 'C'); hex_no_d.add_range('E', 'F');
  d.add('d'); d.add('D');
  oct.add_range('0', '7');
  // \uXXXX without surrogates: first digit not d/D, or d/D followed by 0-7.
  alts.push_back({Symbol::byte('\\'), Symbol::byte('u'), Symbol::set(hex_no_d), Symbol::set(hex),
                  Symbol::set(hex), Symbol::set(hex)});
  alts.push_back({Symbol::byte('\\'), Symbol::byte('u'), Symbol::set(d), Symbol::set(oct),
                  Symbol::set(hex), Symbol::set(hex)});
  json_char_rule_ = b_.add_rule("json_char", std::move(alts));
  return Symbol::ref(json_char_rule_);
}

}  // namespace qs::constrained
