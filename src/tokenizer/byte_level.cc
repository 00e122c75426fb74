#include "tokenizer/byte_level.h"

#include <utf8proc.h>

#include <array>

namespace qs::tokenizer_detail {
namespace {

bool stands_for_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // all alphabet code points are below U+0200

  Alphabet() {
    from_cp.fill(-1);
    uint32_t next_extra = 256;
    for (unsigned b = 0; b < 256; ++b) {
      to_cp[b] = stands_for_itself(b) ? b : next_extra++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet table;
  return table;
}

void append_utf8(uint32_t cp, std::string& out) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return alphabet().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) {
  return cp < alphabet().from_cp.size() ? alphabet().from_cp[cp] : -1;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) append_utf8(byte_to_codepoint(static_cast<uint8_t>(c)), out);
  return out;
}

bool byte_level_to_bytes(std::string_view token, std::string& out) {
  out.clear();
  const auto* s = reinterpret_cast<const utf8proc_uint8_t*>(token.data());
  utf8proc_ssize_t remaining = static_cast<utf8proc_ssize_t>(token.size());
  while (remaining > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(s, remaining, &cp);
    if (n <= 0) return false;
    const int b = codepoint_to_byte(static_cast<uint32_t>(cp));
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
    s += n;
    remaining -= n;
  }
  return true;
}

}  // namespace qs::tokenizer_detail
