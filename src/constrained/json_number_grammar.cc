#include "constrained/json_number_grammar.h"

#include <cmath>
#include <string>

namespace qs::constrained {

namespace {

Symbol digit_range(char lo, char hi) {
  return Symbol::set(ByteSet::range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
}

/// Alternatives for the digit strings of equal length between a and b (a <= b, same length).
std::vector<Sequence> same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return {Sequence{}};
  if (a[0] == b[0]) {
    std::vector<Sequence> out;
    for (auto& tail : same_length(a.substr(1), b.substr(1))) {
      Sequence s{Symbol::byte(static_cast<uint8_t>(a[0]))};
      append(s, tail);
      out.push_back(std::move(s));
    }
    return out;
  }
  const size_t rest = a.size() - 1;
  const std::string zeros(rest, '0'), nines(rest, '9');
  if (a.substr(1) == zeros && b.substr(1) == nines) {
    Sequence s{digit_range(a[0], b[0])};
    for (size_t k = 0; k < rest; ++k) s.push_back(digit_range('0', '9'));
    return {s};
  }
  std::vector<Sequence> out;
  for (auto& tail : same_length(a.substr(1), nines)) {
    Sequence s{Symbol::byte(static_cast<uint8_t>(a[0]))};
    append(s, tail);
    out.push_back(std::move(s));
  }
  if (a[0] + 1 <= b[0] - 1) {
    Sequence s{digit_range(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1))};
    for (size_t k = 0; k < rest; ++k) s.push_back(digit_range('0', '9'));
    out.push_back(std::move(s));
  }
  for (auto& tail : same_length(zeros, b.substr(1))) {
    Sequence s{Symbol::byte(static_cast<uint8_t>(b[0]))};
    append(s, tail);
    out.push_back(std::move(s));
  }
  return out;
}

/// Non-negative integers in [lo, hi].
std::vector<Sequence> unsigned_range(int64_t lo, int64_t hi) {
  std::vector<Sequence> out;
  if (lo > hi) return out;
  int64_t band_lo = 0, band_hi = 9;
  for (int digits = 1; digits <= 18 && band_lo <= hi; ++digits) {
    const int64_t a = std::max(lo, band_lo), c = std::min(hi, band_hi);
    if (a <= c) {
      for (auto& s : same_length(std::to_string(a), std::to_string(c))) out.push_back(std::move(s));
    }
    band_lo = band_hi + 1;
    band_hi = band_hi * 10 + 9;
  }
  return out;
}

Sequence with_prefix(char c, Symbol body) { return {Symbol::byte(static_cast<uint8_t>(c)), body}; }

}  // namespace

std::vector<Sequence> integer_range(GrammarBuilder& b, int64_t lo, int64_t hi) {
  lo = std::max(lo, -kMaxMagnitude);
  hi = std::min(hi, kMaxMagnitude);
  std::vector<Sequence> out;
  if (lo > hi) return out;
  if (lo < 0) {
    auto neg = unsigned_range(std::max<int64_t>(1, -std::min<int64_t>(hi, -1)), -lo);
    if (!neg.empty()) out.push_back(with_prefix('-', b.alt(std::move(neg), "neg_int")));
  }
  if (hi >= 0) {
    for (auto& s : unsigned_range(std::max<int64_t>(lo, 0), hi)) out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sequence> bounded_number(GrammarBuilder& b, std::optional<double> lo, bool lo_exclusive,
                                     std::optional<double> hi, bool hi_exclusive) {
  const double cap = static_cast<double>(kMaxMagnitude);
  const double flo = lo ? std::max(*lo, -cap) : -cap;
  const double fhi = hi ? std::min(*hi, cap) : cap;
  std::vector<Sequence> out;
  if (flo > fhi) return out;
  // Integer values.
  const double ilo = lo_exclusive ? std::floor(flo) + 1 : std::ceil(flo);
  const double ihi = hi_exclusive ? std::ceil(fhi) - 1 : std::floor(fhi);
  if (ilo <= ihi) {
    auto ints = integer_range(b, static_cast<int64_t>(ilo), static_cast<int64_t>(ihi));
    if (!ints.empty()) out.push_back({b.alt(std::move(ints), "int")});
  }
  // Decimals I.F with F in (0, 1): "." [0-9]* [1-9].
  Sequence frac{Symbol::byte('.'), b.star({digit_range('0', '9')}), digit_range('1', '9')};
  const Symbol frac_rule = b.alt({frac}, "frac");
  const double plo = std::max(0.0, std::ceil(flo)), phi = std::floor(fhi) - 1;
  if (plo <= phi) {
    auto parts = unsigned_range(static_cast<int64_t>(plo), static_cast<int64_t>(phi));
    out.push_back({b.alt(std::move(parts), "int_part"), frac_rule});
  }
  const double nlo = std::max(0.0, std::ceil(-fhi)), nhi = std::floor(-flo) - 1;
  if (nlo <= nhi) {
    auto parts = unsigned_range(static_cast<int64_t>(nlo), static_cast<int64_t>(nhi));
    out.push_back({Symbol::byte('-'), b.alt(std::move(parts), "int_part"), frac_rule});
  }
  return out;
}

Sequence any_number(GrammarBuilder& b) {
  Sequence s{b.opt({Symbol::byte('-')})};
  Sequence nonzero{digit_range('1', '9')};
  append(nonzero, b.repeat({digit_range('0', '9')}, 0, 14));
  s.push_back(b.alt({{Symbol::byte('0')}, nonzero}, "int_part"));
  s.push_back(b.opt({Symbol::byte('.'), b.plus({digit_range('0', '9')})}));
  Sequence exp{Symbol::set([] {
    ByteSet e;
    e.add('e');
    e.add('E');
    return e;
  }())};
  exp.push_back(b.opt({Symbol::set([] {
    ByteSet e;
    e.add('-');
    e.add('+');
    return e;
  }())}));
  append(exp, b.repeat({digit_range('0', '9')}, 1, 2));
  s.push_back(b.opt(exp));
  return s;
}

}  // namespace qs::constrained
