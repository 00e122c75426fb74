// A set of byte values 0..255 as four 64-bit words: the terminal of the byte-level grammars.
#pragma once

#include <array>
#include <cstdint>

namespace qs::constrained {

struct ByteSet {
  std::array<uint64_t, 4> words{};

  static ByteSet of(uint8_t b) {
    ByteSet s;
    s.add(b);
    return s;
  }
  static ByteSet range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.add_range(lo, hi);
    return s;
  }
  void add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi && b < 256; ++b) add(static_cast<uint8_t>(b));
  }
  void add_all(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
  }
  bool has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

}  // namespace qs::constrained
