// HTTP worker threads: the count follows the documented rule (running + waiting requests + spares)
// and is bounded; the pool runs jobs on that many threads at once, and a thread that cannot be
// created is an error, not std::terminate.
#include "server/http_worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "core/error.h"

namespace qs {
namespace {

TEST(HttpWorkerThreads, OnePerRunningOrWaitingRequestPlusSpares) {
  EXPECT_EQ(http_worker_threads(16, 256), 16 + 256 + kHttpSpareThreads);
  EXPECT_EQ(http_worker_threads(16, 0), 16 + kHttpSpareThreads) << "--max-queue 0: no queue threads";
  EXPECT_EQ(http_worker_threads(1, kMaxHttpThreads - kHttpSpareThreads - 1), kMaxHttpThreads);
}

TEST(HttpWorkerThreads, AboveTheLimitIsAnErrorNamingTheOptionsAndTheLimit) {
  try {
    http_worker_threads(16, 100000);
    FAIL() << "no error for --max-queue 100000";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--max-queue 100000"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(kMaxHttpThreads)), std::string::npos) << message;
    EXPECT_NE(message.find("--max-queue " + std::to_string(kMaxHttpThreads - kHttpSpareThreads - 16) + " or less"),
              std::string::npos) << message;
  }
  EXPECT_THROW(http_worker_threads(kMaxHttpThreads, 0), Error);
}

TEST(HttpWorkerThreads, WrappedOrHugeValuesAreErrorsNotUnlimited) {
  // 2^64 - 1 parsed into an int64 option reads as -1; it must not mean "no limit".
  EXPECT_THROW(http_worker_threads(16, -1), Error);
  EXPECT_THROW(http_worker_threads(16, INT64_MAX), Error);
  EXPECT_THROW(http_worker_threads(0, 4), Error);
  EXPECT_THROW(http_worker_threads(INT64_MAX, 4), Error);
  EXPECT_EQ(http_worker_threads(16, 0), 16 + kHttpSpareThreads);
}

TEST(HttpWorkerPool, RunsJobsOnAllThreadsAtOnce) {
  constexpr int kThreads = 4;
  HttpWorkerPool pool(kThreads);
  EXPECT_EQ(pool.size(), static_cast<size_t>(kThreads));
  // Each job waits until all kThreads jobs have started: this finishes only if they run together.
  std::mutex mutex;
  std::condition_variable cond;
  int started = 0;
  std::atomic<int> finished{0};
  for (int i = 0; i < kThreads; ++i) {
    pool.enqueue([&] {
      std::unique_lock<std::mutex> lock(mutex);
      ++started;
      cond.notify_all();
      if (cond.wait_for(lock, std::chrono::seconds(10), [&] { return started == kThreads; })) ++finished;
    });
  }
  for (int i = 0; i < 100; ++i) pool.enqueue([&] { ++finished; });
  pool.shutdown();  // runs what is queued, then joins
  EXPECT_EQ(finished.load(), kThreads + 100);
  pool.shutdown();  // idempotent
}

// Connections that hold their threads (idle or trickling clients) must not keep a new one waiting:
// a job no free thread can take starts one, up to the limit; beyond it, jobs wait.
TEST(HttpWorkerPool, StartsAWorkerForAJobNoFreeThreadCanTakeUpToTheLimit) {
  HttpWorkerPool pool(2, 5);
  EXPECT_EQ(pool.size(), 2u);
  std::mutex mutex;
  std::condition_variable cond;
  int running = 0;
  bool release = false;
  const auto blocker = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    ++running;
    cond.notify_all();
    cond.wait(lock, [&] { return release; });
  };
  for (int i = 0; i < 5; ++i) pool.enqueue(blocker);
  {
    std::unique_lock<std::mutex> lock(mutex);
    EXPECT_TRUE(cond.wait_for(lock, std::chrono::seconds(10), [&] { return running == 5; })) << running << " running";
  }
  EXPECT_EQ(pool.size(), 5u);
  pool.enqueue(blocker);  // the limit: waits for a thread
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(running, 5);
    release = true;
  }
  cond.notify_all();
  pool.shutdown();
  EXPECT_EQ(running, 6);
  EXPECT_EQ(pool.size(), 0u) << "joined";
}

// A thread that cannot be started for a queued job is no error: the job waits for a free one.
TEST(HttpWorkerPool, AWorkerThatCannotStartLeavesTheJobQueued) {
  int spawned = 0;
  const HttpWorkerPool::Spawn only_one = [&](std::function<void()> body) {
    if (spawned == 1) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    ++spawned;
    return std::thread(std::move(body));
  };
  HttpWorkerPool pool(1, 4, only_one);
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) pool.enqueue([&] { ++done; });
  pool.shutdown();
  EXPECT_EQ(done.load(), 3);
  EXPECT_EQ(spawned, 1);
}

TEST(HttpWorkerPool, ThreadCreationFailureIsAnErrorAndStopsTheStartedThreads) {
  int spawned = 0;
  const HttpWorkerPool::Spawn fail_after_three = [&](std::function<void()> body) {
    if (spawned == 3) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    ++spawned;
    return std::thread(std::move(body));
  };
  try {
    HttpWorkerPool pool(8, 0, fail_after_three);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cannot start 8 HTTP worker threads (3 started)"), std::string::npos) << message;
  }
  EXPECT_EQ(spawned, 3);  // and the process is still alive: the 3 threads were joined
}

}  // namespace
}  // namespace qs
