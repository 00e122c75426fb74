// Test helpers for the model-file readers: a per-test temporary directory and a little-endian byte
// builder that encodes values by shifting (independent of the code under test).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace qs::testing {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "_" + info->name() : "test";
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = std::filesystem::temp_directory_path() /
            ("qs_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  /// Path of `name` inside the directory, as a string.
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Writes `bytes` to `path` (replacing it) and returns `path`.
inline std::string write_file(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  EXPECT_TRUE(out.good()) << "cannot write " << path;
  return path;
}

/// Little-endian byte stream builder.
struct LeBytes {
  std::string data;

  LeBytes& uint(uint64_t v, int n_bytes) {
    for (int i = 0; i < n_bytes; ++i) data += static_cast<char>((v >> (8 * i)) & 0xff);
    return *this;
  }
  LeBytes& u8(uint8_t v) { return uint(v, 1); }
  LeBytes& i8(int8_t v) { return uint(static_cast<uint8_t>(v), 1); }
  LeBytes& u16(uint16_t v) { return uint(v, 2); }
  LeBytes& i16(int16_t v) { return uint(static_cast<uint16_t>(v), 2); }
  LeBytes& u32(uint32_t v) { return uint(v, 4); }
  LeBytes& i32(int32_t v) { return uint(static_cast<uint32_t>(v), 4); }
  LeBytes& u64(uint64_t v) { return uint(v, 8); }
  LeBytes& i64(int64_t v) { return uint(static_cast<uint64_t>(v), 8); }
  LeBytes& f32(float v) { return u32(std::bit_cast<uint32_t>(v)); }
  LeBytes& f64(double v) { return u64(std::bit_cast<uint64_t>(v)); }
  LeBytes& raw(std::string_view s) {
    data += s;
    return *this;
  }
  /// GGUF string: u64 length, then the bytes.
  LeBytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  /// Zero bytes up to the next multiple of `alignment`.
  LeBytes& pad_to(size_t alignment) {
    while (data.size() % alignment != 0) data += '\0';
    return *this;
  }
  size_t size() const { return data.size(); }
};

}  // namespace qs::testing
