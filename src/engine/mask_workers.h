// Worker threads that compute structured-output token masks while the backend runs a step.
//
// Separate from the forward pass's ThreadPool (whose workers are busy inside Backend::launch on
// the CPU backend). Per step: start(n, fn) hands tasks 0..n-1 to the workers and returns at once;
// join() makes the calling thread take the tasks nobody has started yet, then waits for the rest
// and rethrows the first exception a task threw. fn(i) must be safe to run concurrently for
// distinct i. One start()/join() pair at a time (engine thread only).
#pragma once

#include <cstdint>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qs {

class MaskWorkers {
 public:
  /// `n_threads` >= 0 worker threads (0: join() runs every task on the caller).
  explicit MaskWorkers(int n_threads);
  ~MaskWorkers();
  MaskWorkers(const MaskWorkers&) = delete;
  MaskWorkers& operator=(const MaskWorkers&) = delete;

  void start(int n_tasks, std::function<void(int)> fn);
  /// Runs the remaining tasks on the caller, waits for all; rethrows a task's exception.
  void join();

 private:
  void worker();
  bool run_one(uint64_t generation);  // runs one task of that start(); false when none is left

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::function<void(int)> fn_;
  int n_tasks_ = 0;
  int next_ = 0;           // guarded by mu_
  int finished_ = 0;      // guarded by mu_
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace qs
