#include "loadtest/progress.h"

#include <unistd.h>

#include <cstdio>

namespace qs::loadtest {

Progress::Progress(std::string label, size_t total, bool enabled)
    : label_(std::move(label)),
      total_(total),
      tty_(isatty(STDERR_FILENO) != 0),
      enabled_(enabled),
      start_(std::chrono::steady_clock::now()) {}

void Progress::add(size_t done_requests, bool failed) {
  std::lock_guard lock(mutex_);
  done_ += done_requests;
  if (failed) failed_ += done_requests;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ >= std::chrono::milliseconds(100) || done_ == total_) {
      last_draw_ = now;
      draw_locked(false);
    }
  } else if (total_ > 0 && done_ * 4 >= next_quarter_ * total_) {
    while (done_ * 4 >= next_quarter_ * total_) ++next_quarter_;
    draw_locked(true);
  }
}

void Progress::finish() {
  std::lock_guard lock(mutex_);
  if (enabled_ && tty_) {
    if (done_ != drawn_done_) draw_locked(false);
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
}

void Progress::draw_locked(bool final_line) {
  constexpr int kWidth = 30;
  drawn_done_ = done_;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double frac = total_ ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "%s%s [%s] %zu/%zu requests, %zu errors, %.1f s%s",
               tty_ ? "\r" : "", label_.c_str(), bar.c_str(), done_, total_, failed_, elapsed,
               final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace qs::loadtest
