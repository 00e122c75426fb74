// ThreadPool::parallel_for: coverage, chunking, thread indices, many back-to-back calls; pinning.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <tuple>
#include <vector>

#include "core/thread_pool.h"

namespace qs {
namespace {

struct Chunk {
  int64_t begin;
  int64_t end;
  int thread;
};

std::vector<Chunk> record_chunks(ThreadPool& pool, int64_t n, std::vector<std::atomic<int>>* hits) {
  std::mutex mutex;
  std::vector<Chunk> chunks;
  pool.parallel_for(n, [&](int64_t begin, int64_t end, int thread) {
    if (hits != nullptr) {
      for (int64_t i = begin; i < end; ++i) (*hits)[static_cast<size_t>(i)].fetch_add(1);
    }
    std::lock_guard<std::mutex> lock(mutex);
    chunks.push_back({begin, end, thread});
  });
  return chunks;
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int n_threads = 1; n_threads <= 4; ++n_threads) {
    ThreadPool pool(n_threads);
    EXPECT_EQ(pool.n_threads(), n_threads);
    for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 13, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      const std::vector<Chunk> chunks = record_chunks(pool, n, &hits);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
            << "index " << i << " n=" << n << " threads=" << n_threads;
      }
      if (n == 0) {
        EXPECT_TRUE(chunks.empty());
      }
    }
  }
}

TEST(ThreadPool, ChunksAreDisjointContiguousAndNearEqual) {
  for (int n_threads = 1; n_threads <= 4; ++n_threads) {
    ThreadPool pool(n_threads);
    for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 13, 1000, 1001}) {
      std::vector<Chunk> chunks = record_chunks(pool, n, nullptr);
      ASSERT_FALSE(chunks.empty());
      ASSERT_LE(chunks.size(), static_cast<size_t>(n_threads));
      std::sort(chunks.begin(), chunks.end(),
                [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
      EXPECT_EQ(chunks.front().begin, 0);
      EXPECT_EQ(chunks.back().end, n);
      std::vector<int> threads_seen;
      int64_t min_size = n, max_size = 0;
      for (size_t c = 0; c < chunks.size(); ++c) {
        EXPECT_LT(chunks[c].begin, chunks[c].end) << "empty chunk, n=" << n;
        if (c > 0) {
          EXPECT_EQ(chunks[c].begin, chunks[c - 1].end) << "gap/overlap, n=" << n;
          // The split is deterministic: chunks are in thread order.
          EXPECT_GT(chunks[c].thread, chunks[c - 1].thread);
        }
        EXPECT_GE(chunks[c].thread, 0);
        EXPECT_LT(chunks[c].thread, n_threads);
        threads_seen.push_back(chunks[c].thread);
        min_size = std::min(min_size, chunks[c].end - chunks[c].begin);
        max_size = std::max(max_size, chunks[c].end - chunks[c].begin);
      }
      // Near-equal: when every thread gets work, sizes differ by at most one.
      if (n >= n_threads) {
        EXPECT_EQ(chunks.size(), static_cast<size_t>(n_threads)) << "n=" << n;
        EXPECT_LE(max_size - min_size, 1) << "n=" << n << " threads=" << n_threads;
      }
      std::sort(threads_seen.begin(), threads_seen.end());
      EXPECT_EQ(std::adjacent_find(threads_seen.begin(), threads_seen.end()), threads_seen.end())
          << "a thread index ran two chunks";
    }
  }
}

TEST(ThreadPool, SameSplitEveryCall) {
  ThreadPool pool(3);
  auto sorted = [](std::vector<Chunk> c) {
    std::sort(c.begin(), c.end(), [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
    std::vector<std::tuple<int64_t, int64_t, int>> out;
    for (const Chunk& x : c) out.emplace_back(x.begin, x.end, x.thread);
    return out;
  };
  const auto first = sorted(record_chunks(pool, 100, nullptr));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sorted(record_chunks(pool, 100, nullptr)), first);
}

TEST(ThreadPool, ManyBackToBackCallsDoNotDeadlock) {
  for (int n_threads : {2, 4}) {
    ThreadPool pool(n_threads);
    std::atomic<int64_t> total{0};
    int64_t expected = 0;
    for (int call = 0; call < 10000; ++call) {
      const int64_t n = 1 + call % 9;
      pool.parallel_for(n, [&](int64_t begin, int64_t end, int thread) {
        ASSERT_GE(thread, 0);
        ASSERT_LT(thread, n_threads);
        int64_t s = 0;
        for (int64_t i = begin; i < end; ++i) s += i + 1;
        total.fetch_add(s);
      });
      expected += n * (n + 1) / 2;
      // Every chunk of this call has finished when parallel_for returns.
      ASSERT_EQ(total.load(), expected) << "call " << call;
    }
  }
}

TEST(ThreadPool, AcceptsConstAndMutableCallables) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  const auto add = [&sum](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) sum.fetch_add(i);
  };
  pool.parallel_for(10, add);
  EXPECT_EQ(sum.load(), 45);
  std::atomic<int> calls{0};
  // A mutable (non-const call operator) lambda; it is shared by all threads, so it only reads.
  pool.parallel_for(10, [&calls, step = 1](int64_t, int64_t, int) mutable { calls.fetch_add(step); });
  EXPECT_EQ(calls.load(), 3);
}

TEST(ThreadPool, ClampsThreadCountAndDefaultIsPositive) {
  ThreadPool pool(0);
  EXPECT_EQ(pool.n_threads(), 1);
  int64_t covered = 0;
  pool.parallel_for(5, [&](int64_t begin, int64_t end, int thread) {
    EXPECT_EQ(thread, 0);
    covered += end - begin;
  });
  EXPECT_EQ(covered, 5);
  EXPECT_GE(default_thread_count(), 1);
}

TEST(ThreadPool, DestroysCleanlyWithoutWork) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(4);
  }
  SUCCEED();
}

}  // namespace
}  // namespace qs

namespace qs {
namespace {

TEST(ThreadPoolPinning, EachWorkerRunsOnItsOwnSingleCpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const int n_cpus = CPU_COUNT(&allowed);
  if (n_cpus < 2) GTEST_SKIP() << "needs at least 2 CPUs";
  ThreadPool oversubscribed(n_cpus + 1);
  EXPECT_FALSE(oversubscribed.pin_workers_to_cpus());

  ThreadPool pool(n_cpus);
  ASSERT_TRUE(pool.pin_workers_to_cpus());
  std::vector<int> single_cpu(static_cast<size_t>(n_cpus), -1);
  pool.parallel_for(n_cpus, [&](int64_t, int64_t, int thread) {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    pthread_getaffinity_np(pthread_self(), sizeof(mine), &mine);
    if (CPU_COUNT(&mine) != 1) return;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mine)) single_cpu[static_cast<size_t>(thread)] = c;
    }
  });
  std::vector<int> seen;
  for (int t = 1; t < n_cpus; ++t) {  // workers; thread 0 is the unpinned caller
    const int cpu = single_cpu[static_cast<size_t>(t)];
    ASSERT_GE(cpu, 0) << "worker " << t << " is not pinned to exactly one CPU";
    EXPECT_TRUE(CPU_ISSET(cpu, &allowed));
    EXPECT_EQ(std::count(seen.begin(), seen.end(), cpu), 0) << "two workers on CPU " << cpu;
    seen.push_back(cpu);
  }
}

}  // namespace
}  // namespace qs
