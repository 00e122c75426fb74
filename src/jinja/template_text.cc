#include "jinja/template_text.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace qs::chat::text {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Appends `cp` to `out`, upper- or lower-cased (ASCII exactly, others via utf8proc).
void append_mapped(std::string& out, char32_t cp, bool upper) {
  if (cp < 0x80) {
    char c = static_cast<char>(cp);
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    out.push_back(c);
    return;
  }
  if (upper && cp == 0xDF) {
    out += "SS";
    return;
  }
  const auto mapped = upper ? utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))
                            : utf8proc_tolower(static_cast<utf8proc_int32_t>(cp));
  append_utf8(out, static_cast<char32_t>(mapped));
}

std::string map_case(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) append_mapped(out, decode_utf8(s, pos), upper);
  return out;
}

// Length of the decimal literal (digits, fraction, exponent) at the start of `s`; 0 if none.
size_t decimal_literal_length(std::string_view s) {
  size_t i = 0;
  size_t int_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
  size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && is_digit(s[j])) ++j, ++frac_digits;
    if (int_digits > 0 || frac_digits > 0) i = j;
  }
  if (int_digits == 0 && frac_digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t exp_digits = 0;
    while (j < s.size() && is_digit(s[j])) ++j, ++exp_digits;
    if (exp_digits > 0) i = j;
  }
  return i;
}

double to_double(std::string_view literal) {
  return std::strtod(std::string(literal).c_str(), nullptr);
}

// Parses an optionally signed decimal literal or Infinity at the start of `s`; sets `used`.
std::optional<double> signed_decimal_prefix(std::string_view s, size_t& used) {
  size_t i = 0;
  double sign = 1;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
  const std::string_view rest = s.substr(i);
  if (rest.substr(0, 8) == "Infinity") {
    used = i + 8;
    return sign * HUGE_VAL;
  }
  const size_t length = decimal_literal_length(rest);
  if (length == 0) return std::nullopt;
  used = i + length;
  return sign * to_double(rest.substr(0, length));
}

}  // namespace

char32_t decode_utf8(std::string_view s, size_t& pos) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  size_t extra = 0;
  char32_t cp = 0;
  if ((lead & 0xE0) == 0xC0) {
    extra = 1, cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    extra = 2, cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    extra = 3, cp = lead & 0x07;
  } else {
    ++pos;
    return kReplacement;
  }
  if (pos + extra >= s.size()) {
    ++pos;
    return kReplacement;
  }
  for (size_t i = 1; i <= extra; ++i) {
    const auto byte = static_cast<unsigned char>(s[pos + i]);
    if ((byte & 0xC0) != 0x80) {
      ++pos;
      return kReplacement;
    }
    cp = (cp << 6) | (byte & 0x3F);
  }
  pos += extra + 1;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacement;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_js_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool is_word_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}

size_t space_run(std::string_view s, size_t pos) {
  size_t end = pos;
  while (end < s.size()) {
    size_t next = end;
    if (!is_js_space(decode_utf8(s, next))) break;
    end = next;
  }
  return end - pos;
}

std::string_view trim_start(std::string_view s) { return s.substr(space_run(s, 0)); }

std::string_view trim_end(std::string_view s) {
  size_t keep = 0;
  for (size_t pos = 0; pos < s.size();) {
    if (!is_js_space(decode_utf8(s, pos))) keep = pos;
  }
  return s.substr(0, keep);
}

std::string_view trim(std::string_view s) { return trim_end(trim_start(s)); }

size_t utf16_length(std::string_view s) {
  size_t units = 0;
  for (size_t pos = 0; pos < s.size();) units += decode_utf8(s, pos) > 0xFFFF ? 2 : 1;
  return units;
}

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    decode_utf8(s, pos);
    out.push_back(s.substr(start, pos - start));
  }
  return out;
}

std::string to_upper(std::string_view s) { return map_case(s, true); }

std::string to_lower(std::string_view s) { return map_case(s, false); }

std::string title_case(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool boundary = i == 0 || !is_word_byte(out[i - 1]);
    if (boundary && out[i] >= 'a' && out[i] <= 'z') out[i] = static_cast<char>(out[i] - 'a' + 'A');
  }
  return out;
}

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t pos = 0;
  const char32_t first = decode_utf8(s, pos);
  std::string out;
  if (first > 0xFFFF) {
    out.append(s.substr(0, pos));
  } else {
    append_mapped(out, first, true);
  }
  out.append(s.substr(pos));
  return out;
}

std::string format_js_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return "0";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  std::string out = sci[0] == '-' ? "-" : "";
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(out.size(), e - out.size())) {
    if (c != '.') digits.push_back(c);
  }
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;
  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out.append(digits, 0, static_cast<size_t>(n));
    out += '.';
    out.append(digits, static_cast<size_t>(n), std::string::npos);
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-n), '0');
    out += digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    out += n - 1 >= 0 ? "e+" : "e-";
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string format_float(double value) {
  if (value == 0 && std::signbit(value)) return "-0.0";
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e21) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", value);
    return buf;
  }
  return format_js_number(value);
}

std::optional<double> parse_js_int(std::string_view s) {
  s = trim_start(s);
  double sign = 1;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    sign = s[0] == '-' ? -1 : 1;
    s.remove_prefix(1);
  }
  size_t digits = 0;
  while (digits < s.size() && is_digit(s[digits])) ++digits;
  if (digits == 0) return std::nullopt;
  return sign * to_double(s.substr(0, digits));
}

std::optional<double> parse_js_float(std::string_view s) {
  size_t used = 0;
  return signed_decimal_prefix(trim_start(s), used);
}

double js_string_to_number(std::string_view s) {
  s = trim(s);
  if (s.empty()) return 0;
  if (s.size() > 2 && s[0] == '0') {
    const char kind = static_cast<char>(s[1] | 0x20);
    const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : kind == 'b' ? 2 : 0;
    if (base != 0) {
      double value = 0;
      for (char c : s.substr(2)) {
        const int lower = c | 0x20;
        const int digit = is_digit(c)                      ? c - '0'
                          : (lower >= 'a' && lower <= 'z') ? lower - 'a' + 10
                                                           : 99;
        if (digit >= base) return NAN;
        value = value * base + digit;
      }
      return value;
    }
  }
  size_t used = 0;
  const auto value = signed_decimal_prefix(s, used);
  return value && used == s.size() ? *value : NAN;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
  std::string out = "\"";
  char buf[16];
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const char32_t cp = decode_utf8(s, pos);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (cp < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else if (ensure_ascii && cp >= 0x7F) {
      if (cp > 0xFFFF) {
        const char32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += buf;
    } else {
      out.append(s.substr(start, pos - start));
    }
  }
  return out + "\"";
}

}  // namespace qs::chat::text
