// The HTTP server's worker threads: how many a configuration needs, and a pool that starts them
// up front (reporting a failure to create one as an error) and grows when they are all busy.
//
// cpp-httplib serves each connection on one worker thread, and our handlers block while their
// request waits in the engine's queue or streams, so every running or waiting request holds a
// thread; the spare threads answer /health, /metrics, /stats and the immediate 429/503 rejections
// when all the others are busy. httplib::ThreadPool (0.11) calls std::terminate when a thread
// cannot be created (its constructor throws with joinable threads in a member vector), hence this
// pool behind httplib's TaskQueue interface.
//
// Every connection holds its thread until it closes, an idle one included (a keep-alive connection
// for 5 s, a request head still arriving until --request-head-timeout): a few dozen clients that
// open connections and send nothing would hold every thread, and /health would wait behind them.
// So when a connection is queued and no thread is free to take it, the pool starts one more, up to
// kMaxHttpThreads; those threads stay (an idle thread costs a stack's touched pages) and serve
// later bursts at once.
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
  /// Later, a job queued while every thread is busy starts one more thread, up to `max_threads`
  /// (at least `n`); a failure to start it only leaves the job queued for the next free thread.
  explicit HttpWorkerPool(size_t n, size_t max_threads = 0, Spawn spawn = {});
  ~HttpWorkerPool() override;
  HttpWorkerPool(const HttpWorkerPool&) = delete;
  HttpWorkerPool& operator=(const HttpWorkerPool&) = delete;

  /// Queues `fn` for the next free worker (FIFO), starting a worker when none is free (see above).
  void enqueue(std::function<void()> fn) override;
  /// Lets the workers finish the queued jobs, then joins them. Idempotent.
  void shutdown() override;

  /// Worker threads started so far. Thread-safe.
  size_t size() const;

 private:
  void work();

  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  size_t max_threads_;
  Spawn spawn_;
  size_t free_ = 0;  // workers waiting for a job
  bool stopping_ = false;
  mutable std::mutex mutex_;
  std::condition_variable cond_;
};

}  // namespace qs
