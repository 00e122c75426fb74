// Progress of a benchmark level on stderr: a redrawn bar when stderr is a terminal, otherwise one
// plain line at each quarter of the requests. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace qs::loadtest {

class Progress {
 public:
  Progress(std::string label, size_t total, bool enabled = true);
  void add(size_t done_requests, bool failed);
  void finish();

 private:
  void draw_locked(bool final_line);

  std::mutex mutex_;
  std::string label_;
  size_t total_;
  size_t done_ = 0;
  size_t failed_ = 0;
  size_t drawn_done_ = SIZE_MAX;  // done_ at the last draw
  size_t next_quarter_ = 1;
  bool tty_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace qs::loadtest
