// Read-only memory mapping of a whole file (model weights are used in place, never copied).
//
// Two load options (`--no-mmap`, `--mlock` on every command that loads a model): mmapped pages of
// a file are page cache and can be evicted under memory pressure, after which a decode step reads
// weights from disk again. `no_mmap` reads the file into anonymous memory instead (counted as the
// process's own memory, only swapped out under real shortage); `mlock` additionally locks the
// pages in RAM (mlock(2); needs RLIMIT_MEMLOCK >= the file size or CAP_IPC_LOCK: on failure a
// warning goes to stderr and loading continues unlocked, as llama.cpp does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qs {

struct MapOptions {
  bool no_mmap = false;  // read the whole file into anonymous memory
  bool mlock = false;    // lock the pages in RAM
};

class MappedFile {
 public:
  /// Maps (or reads, per the process default options) `path` read-only. Throws qs::Error naming
  /// the path when it cannot be opened, mapped, or read.
  explicit MappedFile(const std::string& path);
  MappedFile(const std::string& path, const MapOptions& options);

  /// Options used by MappedFile(path) from now on. The CLI sets them once, before loading a
  /// model (the model readers open their files through MappedFile(path)). Thread-safe.
  static void set_default_options(const MapOptions& options);
  static MapOptions default_options();
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }
  const std::string& path() const { return path_; }
  /// True when the bytes were read into anonymous memory (no_mmap) rather than mapped.
  bool in_ram() const { return in_ram_; }
  /// True when mlock succeeded.
  bool locked() const { return locked_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
  bool in_ram_ = false;
  bool locked_ = false;
};

}  // namespace qs
