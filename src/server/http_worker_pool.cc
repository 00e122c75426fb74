#include "server/http_worker_pool.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "server/request_deadline.h"

namespace qs {

int http_worker_threads(int64_t max_num_seqs, int64_t max_queue) {
  // Values that wrapped on parsing (e.g. 2^64 - 1 read as -1) or would overflow the sum below.
  if (max_queue < 0 || max_queue > INT32_MAX) {
    throw Error("--max-queue " + std::to_string(max_queue) + " is out of range: use 0 (no limit) to " +
                std::to_string(std::max<int64_t>(0, kMaxHttpThreads - kHttpSpareThreads - max_num_seqs)));
  }
  if (max_num_seqs < 1 || max_num_seqs > INT32_MAX) {
    throw Error("--max-num-seqs " + std::to_string(max_num_seqs) + " is out of range: use 1 to " +
                std::to_string(kMaxHttpThreads - kHttpSpareThreads));
  }
  const int64_t needed = max_num_seqs + max_queue + kHttpSpareThreads;
  if (needed <= kMaxHttpThreads) return static_cast<int>(needed);
  const int64_t queue_room = kMaxHttpThreads - kHttpSpareThreads - max_num_seqs;
  throw Error("--max-num-seqs " + std::to_string(max_num_seqs) + " + --max-queue " + std::to_string(max_queue) +
              " + " + std::to_string(kHttpSpareThreads) + " spare need " + std::to_string(needed) +
              " HTTP worker threads (one per running or waiting request), above the limit of " +
              std::to_string(kMaxHttpThreads) +
              (queue_room > 0 ? ": use --max-queue " + std::to_string(queue_room) + " or less"
                              : ": lower --max-num-seqs"));
}

HttpWorkerPool::HttpWorkerPool(size_t n, size_t max_threads, Spawn spawn)
    : max_threads_(std::max(n, max_threads)), spawn_(std::move(spawn)) {
  if (!spawn_) spawn_ = [](std::function<void()> body) { return std::thread(std::move(body)); };
  threads_.reserve(n);
  try {
    for (size_t i = 0; i < n; ++i) {
      std::thread t = spawn_([this] { work(); });
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.push_back(std::move(t));
    }
  } catch (const std::exception& e) {  // std::system_error (EAGAIN), std::bad_alloc
    size_t started = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      started = threads_.size();
    }
    shutdown();
    throw Error("cannot start " + std::to_string(n) + " HTTP worker threads (" + std::to_string(started) +
                " started): " + e.what() + "; raise the limits on threads (ulimit -u, ulimit -v, the cgroup's pids.max) "
                "or lower --max-queue / --max-num-seqs");
  }
}

HttpWorkerPool::~HttpWorkerPool() { shutdown(); }

void HttpWorkerPool::enqueue(std::function<void()> fn) {
  // httplib enqueues a connection right after accepting it on this thread: its request deadlines
  // (request_deadline.h) start when a worker picks it up.
  const int socket = request_deadline::take_accepted_socket();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back([socket, fn = std::move(fn)] { request_deadline::serve_connection(socket, fn); });
    // Each free worker takes one queued job; a job beyond them would wait for a busy connection to
    // end (seconds, for an idle or trickling one): start a worker for it.
    if (jobs_.size() > free_ && threads_.size() < max_threads_ && !stopping_) {
      try {
        threads_.push_back(spawn_([this] { work(); }));
      } catch (const std::exception&) {  // out of threads: the job waits for a free worker
      }
    }
  }
  cond_.notify_one();
}

size_t HttpWorkerPool::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

void HttpWorkerPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;  // no thread is started after this
    threads.swap(threads_);
  }
  cond_.notify_all();
  for (std::thread& t : threads) {
    if (t.joinable()) t.join();
  }
}

void HttpWorkerPool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++free_;
      cond_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      --free_;
      if (jobs_.empty()) return;  // stopping and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace qs
