#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/log.h"

namespace qs {
namespace {

std::atomic<bool> g_no_mmap{false};
std::atomic<bool> g_mlock{false};

// Anonymous read-only memory holding the whole file (read with pread, then mprotect'ed).
const uint8_t* read_into_ram(int fd, const std::string& path, size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw Error(path + ": cannot allocate " + std::to_string(size) + " bytes: " + std::strerror(errno));
  }
  // Transparent huge pages where the kernel allows them (THP "madvise" mode is Debian's default):
  // decode streams every weight byte per token, and 2 MiB pages cut the TLB misses of that stream
  // (and the page faults of this read) 512-fold. Advice only: failure changes nothing.
  ::madvise(p, size, MADV_HUGEPAGE);
  auto* dst = static_cast<uint8_t*>(p);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, dst + done, size - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int err = errno;
      ::munmap(p, size);
      throw Error(path + ": read failed at byte " + std::to_string(done) + ": " +
                  (got == 0 ? std::string("unexpected end of file") : std::strerror(err)));
    }
    done += static_cast<size_t>(got);
  }
  ::mprotect(p, size, PROT_READ);
  return dst;
}

}  // namespace

void MappedFile::set_default_options(const MapOptions& options) {
  g_no_mmap.store(options.no_mmap);
  g_mlock.store(options.mlock);
}

MapOptions MappedFile::default_options() { return MapOptions{g_no_mmap.load(), g_mlock.load()}; }

MappedFile::MappedFile(const std::string& path) : MappedFile(path, default_options()) {}

MappedFile::MappedFile(const std::string& path, const MapOptions& options) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": is a directory, expected a file");
  }
  size_bytes_ = static_cast<size_t>(st.st_size);
  if (size_bytes_ > 0 && options.no_mmap) {
    try {
      data_ = read_into_ram(fd, path, size_bytes_);
    } catch (...) {
      ::close(fd);
      throw;
    }
    in_ram_ = true;
  } else if (size_bytes_ > 0) {
    void* p = ::mmap(nullptr, size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error(path + ": cannot mmap: " + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  if (options.mlock && size_bytes_ > 0) {
    if (::mlock(data_, size_bytes_) == 0) {
      locked_ = true;
    } else {
      process_log::warning(path + ": mlock of " + std::to_string(size_bytes_) + " bytes failed: " + std::strerror(errno) +
                           " (raise `ulimit -l` or run with CAP_IPC_LOCK); continuing unlocked");
    }
  }
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      in_ram_(std::exchange(other.in_ram_, false)),
      locked_(std::exchange(other.locked_, false)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    in_ram_ = std::exchange(other.in_ram_, false);
    locked_ = std::exchange(other.locked_, false);
  }
  return *this;
}

void MappedFile::release() {
  // munmap also drops an mlock and frees no_mmap's anonymous memory.
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_bytes_);
  data_ = nullptr;
  in_ram_ = false;
  locked_ = false;
  size_bytes_ = 0;
}

}  // namespace qs
