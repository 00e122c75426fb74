#include "engine/mask_workers.h"

#include <utility>

namespace qs {

MaskWorkers::MaskWorkers(int n_threads) {
  for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { worker(); });
}

MaskWorkers::~MaskWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void MaskWorkers::start(int n_tasks, std::function<void(int)> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = std::move(fn);
    n_tasks_ = n_tasks;
    next_ = 0;
    finished_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  if (n_tasks > 0) cv_.notify_all();
}

bool MaskWorkers::run_one(uint64_t generation) {
  int i = 0;
  const std::function<void(int)>* fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_ || next_ >= n_tasks_) return false;
    i = next_++;
    fn = &fn_;
  }
  std::exception_ptr error;
  try {
    (*fn)(i);
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error && !error_) error_ = error;
  if (++finished_ == n_tasks_) done_cv_.notify_all();
  return true;
}

void MaskWorkers::worker() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    while (run_one(seen)) {
    }
  }
}

void MaskWorkers::join() {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation = generation_;
  }
  while (run_one(generation)) {
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return finished_ >= n_tasks_; });
  n_tasks_ = 0;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace qs
