// The HTTP server's worker threads: how many a configuration needs, and a pool that starts them
// up front and reports a failure to create one as an error.
//
// cpp-httplib serves each connection on one worker thread, and our handlers block while their
// request waits in the engine's queue or streams, so every running or waiting request holds a
// thread; the spare threads answer /health, /metrics, /stats and the immediate 429/503 rejections
// when all the others are busy. httplib::ThreadPool (0.11) calls std::terminate when a thread
// cannot be created (its constructor throws with joinable threads in a member vector), hence this
// pool behind httplib's TaskQueue interface.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace qs {

/// Worker threads kept free for probes, metrics and fast rejections.
inline constexpr int kHttpSpareThreads = 32;
/// Upper bound on HTTP worker threads (each is a process id; 8 MiB of address space for its stack).
inline constexpr int kMaxHttpThreads = 1024;

/// Threads the server needs: `max_num_seqs` running + `max_queue` waiting requests +
/// kHttpSpareThreads (`max_queue` 0, "no limit": requests beyond these threads wait for one before
/// they are read). Throws qs::Error naming --max-num-seqs / --max-queue, the count and the limit
/// when it exceeds kMaxHttpThreads.
int http_worker_threads(int64_t max_num_seqs, int64_t max_queue);

class HttpWorkerPool : public httplib::TaskQueue {
 public:
  /// Starts a thread running `body`; throws (std::system_error, as std::thread) when it cannot.
  using Spawn = std::function<std::thread(std::function<void()> body)>;

  /// Starts `n` (>= 1) worker threads. When one cannot be created, the ones already started are
  /// stopped and joined and qs::Error is thrown naming `n`, how many started and the reason.
  explicit HttpWorkerPool(size_t n, const Spawn& spawn = {});
  ~HttpWorkerPool() override;
  HttpWorkerPool(const HttpWorkerPool&) = delete;
  HttpWorkerPool& operator=(const HttpWorkerPool&) = delete;

  /// Queues `fn` for the next free worker (FIFO).
  void enqueue(std::function<void()> fn) override;
  /// Lets the workers finish the queued jobs, then joins them. Idempotent.
  void shutdown() override;

  size_t size() const { return threads_.size(); }

 private:
  void work();

  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable cond_;
};

}  // namespace qs
