// Bounds-checked little-endian reader over an in-memory byte range (a memory-mapped model file).
//
// Every read checks the bytes left first and throws qs::Error with a one-line message that starts
// with the file path and says what was being read, at which offset, and how many bytes were left.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace qs {

static_assert(std::endian::native == std::endian::little,
              "BinaryCursor reads little-endian files by memcpy; big-endian hosts need byte swaps");

/// `text` made safe for a one-line error message: bytes outside printable ASCII become \xNN and
/// anything past `max_chars` is cut and marked with "...".
inline std::string printable(std::string_view text, size_t max_chars = 96) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_chars) return out + "...";
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class BinaryCursor {
 public:
  /// Reads `size` bytes at `data`; `path` prefixes every error message.
  BinaryCursor(const uint8_t* data, size_t size, std::string path)
      : data_(data), size_(size), path_(std::move(path)) {}

  size_t offset() const { return offset_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - offset_; }
  const std::string& path() const { return path_; }

  /// Sets text appended to error messages, e.g. "in metadata key 'general.name'".
  void set_context(std::string context) { context_ = std::move(context); }

  /// Reads a trivially copyable little-endian value. Throws qs::Error if fewer than sizeof(T)
  /// bytes are left; `what` names the field ("tensor count").
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }

  /// Returns a view of the next `n` bytes and skips them. Throws qs::Error if fewer are left.
  std::string_view bytes(uint64_t n, const char* what) {
    need(n, what);
    std::string_view view(reinterpret_cast<const char*>(data_ + offset_), static_cast<size_t>(n));
    offset_ += static_cast<size_t>(n);
    return view;
  }

  /// Reads a GGUF string: u64 byte length, then that many bytes (no terminator). Throws
  /// qs::Error when the length exceeds the bytes left (truncated or corrupt file).
  std::string string(const char* what) {
    const size_t at = offset_;
    const uint64_t length = read<uint64_t>(what);
    if (length > remaining()) {
      fail(std::string("string length ") + std::to_string(length) + " of " + what + " at offset " +
           std::to_string(at) + " exceeds the " + std::to_string(remaining()) +
           " bytes left in the file (truncated or corrupt)");
    }
    return std::string(bytes(length, what));
  }

  /// Throws qs::Error("<path>: <message> [<context>]").
  [[noreturn]] void fail(const std::string& message) const {
    throw Error(path_ + ": " + message + (context_.empty() ? "" : " " + context_));
  }

 private:
  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail(std::string("truncated file: ") + what + " needs " + std::to_string(n) +
           " bytes at offset " + std::to_string(offset_) + " but only " +
           std::to_string(remaining()) + " are left (file size " + std::to_string(size_) + ")");
    }
  }

  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  std::string path_;
  std::string context_;
};

}  // namespace qs
