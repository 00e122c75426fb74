// A persistent pool of worker threads for data-parallel loops inside a forward pass.
//
// `parallel_for` splits [0, n) into contiguous chunks, one per thread (the calling thread takes
// part), and returns when all are done. No heap allocation per call: the callable is passed by
// reference through a type-erased trampoline.
//
// Hand-off: a call publishes the task by bumping an atomic generation. Idle workers spin on it
// (with a pause instruction) for up to kSpinMicros before sleeping on a condition variable, and the
// caller spins the same way waiting for the last worker, so back-to-back calls inside a forward
// pass take no lock and make no system call. The mutex is only touched when someone actually
// sleeps (between forward passes).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace qs {

/// Lowers the calling thread's scheduling priority to `nice` (Linux per-thread nice value). The
/// server runs compute (engine thread, matmul workers) below its HTTP threads, so that admission,
/// rejections and streaming stay responsive while the cores are saturated. Failure only means the
/// thread keeps its priority.
void lower_thread_priority(int nice);

class ThreadPool {
 public:
  /// How long an idle worker (or the waiting caller) spins before sleeping.
  static constexpr int kSpinMicros = 200;

  /// `n_threads` >= 1 counts the calling thread; n_threads - 1 workers are started.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  /// Pins worker i (1 <= i < n_threads) to the i-th CPU of the process's affinity mask, so the
  /// scheduler does not migrate them between forward passes (cold L1/L2 after each move). The
  /// calling thread (index 0) stays unpinned and takes the remaining CPU. Does nothing and returns
  /// false when the mask has fewer than n_threads CPUs (oversubscribed) or affinity is unsupported.
  bool pin_workers_to_cpus();

  /// Calls fn(begin, end, thread_index) on disjoint chunks covering [0, n). Thread i gets the
  /// i-th of n_threads near-equal chunks, so the split is deterministic.
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    run(n, &trampoline<std::remove_reference_t<Fn>>, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  template <typename Fn>
  static void trampoline(void* ctx, int64_t begin, int64_t end, int thread) {
    (*static_cast<Fn*>(ctx))(begin, end, thread);
  }

  void run(int64_t n, TaskFn fn, void* ctx);
  void run_chunk(int thread) const;
  void worker_loop(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;                    // only for sleeping / waking
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::atomic<uint64_t> generation_{0};  // bumped once per task
  std::atomic<int> pending_{0};          // workers still running the current task
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stop_{false};
  // The current task; written before generation_ is bumped, read after it is observed.
  TaskFn task_fn_ = nullptr;
  void* task_ctx_ = nullptr;
  int64_t task_n_ = 0;
};

/// Default thread count: the CPUs this process may run on (its affinity mask; online CPUs where
/// that is unavailable), at least 1.
int default_thread_count();

}  // namespace qs
