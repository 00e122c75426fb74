#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace qs {

void lower_thread_priority(int nice) {
  // Per-thread on Linux: PRIO_PROCESS with a thread id sets that thread's nice value. Raising the
  // nice value needs no privilege.
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  ::setpriority(PRIO_PROCESS, tid, nice);
}
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or kSpinMicros elapse; returns done().
template <typename Done>
bool spin_until(Done done) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (Clock::now() >= deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunk(int thread) const {
  const int64_t begin = task_n_ * thread / n_threads_;
  const int64_t end = task_n_ * (thread + 1) / n_threads_;
  if (begin < end) task_fn_(task_ctx_, begin, end, thread);
}

// Ordering: generation_ / sleeping_workers_ and pending_ / caller_sleeping_ are seq_cst pairs, so
// either the publisher sees the sleeper (and notifies under the mutex the sleeper holds until it
// waits) or the sleeper's predicate sees the new state.
void ThreadPool::run(int64_t n, TaskFn fn, void* ctx) {
  task_fn_ = fn;
  task_ctx_ = ctx;
  task_n_ = n;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);
  if (sleeping_workers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    start_cv_.notify_all();
  }
  run_chunk(0);
  auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(all_done)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  caller_sleeping_.store(true);
  done_cv_.wait(lock, [this] { return pending_.load() == 0; });
  caller_sleeping_.store(false);
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen_generation = 0;
  for (;;) {
    auto has_work = [&] {
      return stop_.load(std::memory_order_relaxed) ||
             generation_.load(std::memory_order_acquire) != seen_generation;
    };
    if (!spin_until(has_work)) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_workers_.fetch_add(1);
      start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen_generation; });
      sleeping_workers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen_generation = generation_.load(std::memory_order_acquire);
    run_chunk(thread);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_cv_.notify_one();
    }
  }
}

bool ThreadPool::pin_workers_to_cpus() {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (static_cast<int>(cpus.size()) < n_threads_ || n_threads_ < 2) return false;
  std::atomic<bool> all_pinned{true};
  // Worker i runs chunk i of an n_threads-sized loop, so each pins itself.
  parallel_for(n_threads_, [&](int64_t, int64_t, int thread) {
    if (thread == 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<size_t>(thread)], &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) all_pinned.store(false);
  });
  return all_pinned.load();
#else
  return false;
#endif
}

int default_thread_count() {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 0) return CPU_COUNT(&allowed);
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace qs
