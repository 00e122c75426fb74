// Read-only memory mapping of a whole file (model weights are used in place, never copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qs {

class MappedFile {
 public:
  /// Maps `path` read-only. Throws qs::Error naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
};

}  // namespace qs
