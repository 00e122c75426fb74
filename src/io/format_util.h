// What the GGUF reader and writer and the safetensors reader share: the GGUF limits both sides of
// the format enforce, offset alignment and the "[d0, d1, ...]" shape text of error messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qs {

inline constexpr uint64_t kGgufDefaultAlignment = 32;  // without a general.alignment key
inline constexpr int kGgufMaxArrayNesting = 8;  // deeper nesting is rejected (no real model uses more than 1)

inline uint64_t align_up(uint64_t offset, uint64_t alignment) {
  return offset + (alignment - offset % alignment) % alignment;
}

inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace qs
