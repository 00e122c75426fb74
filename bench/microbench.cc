// qwenserve_microbench: Google Benchmark microbenchmarks of the CPU kernels against the machine's
// memory read bandwidth ("speed of light" for batch-1 decode).
//
//   ReadBandwidth/threads:T   STREAM-like read probe: T threads sum 64-bit words (AVX2 loads) of a buffer much
//                             larger than the last-level cache (QS_BENCH_BUFFER_MB, default 1024
//                             MiB). Counter GB_per_s = bytes read / wall time / 1e9.
//   Gemv/<TYPE>/threads:T     y = W x, one token (decode), W [9728, 2560] (Qwen3-4B ffn_up shape)
//                             stored as TYPE. Several copies of W are cycled so that >= 256 MiB of
//                             weights are touched per cycle (no cache reuse between iterations).
//                             GB_per_s = weight bytes / time / 1e9; pct_of_read_bw = that as a
//                             percent of ReadBandwidth with the same T (measured once, best of 3).
//   GemvPacked/<TYPE>/threads:T  the same product on the 16-row packed layout the CPU backend
//                             uses for Q4_K / Q6_K / Q8_0 where the AVX-512 VNNI kernels run
//                             (kernels/packed_rows.h; weights in 2 MiB-aligned anonymous memory
//                             with MADV_HUGEPAGE, as packed_weights.cc); skipped on other CPUs.
//   Gemm/<TYPE>/tokens:N/threads:T  Y = X W^T, W [2560, 2560], N tokens (N = 1..16: batched
//                             decode steps, 64 and 512: prefill chunks).
//                             GFLOP_per_s = 2 * N * 2560 * 2560 / time / 1e9.
//   PrefillAttention/tokens:N/tile:T  causal attention of one layer over a prefill of N tokens
//                             (Qwen3-4B: 32 query heads, 8 KV heads, head_dim 128, F16 KV cache),
//                             one thread, query tokens in tiles of T (1: one row at a time).
//                             GFLOP_per_s = 4 * 32 * 128 * sum_p (p + 1) / CPU time / 1e9 (QK^T
//                             and PV, 2 flops per multiply-add).
// Run: build/release/bench/qwenserve_microbench [--benchmark_filter=Gemv] (not part of ctest).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "formats/dtype.h"
#include "formats/tensor.h"
#include "core/thread_pool.h"
#include "backend/cpu/kernels/matmul.h"
#include "backend/cpu/kernels/paged_attention.h"
#include "backend/cpu/kernels/packed_rows.h"
#include "backend/cpu/kernels/dot_kernels.h"
#include "formats/quantize.h"

#include <sys/mman.h>

namespace {

using qs::DType;

qs::ThreadPool& pool_for(int threads) {
  static std::map<int, std::unique_ptr<qs::ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<qs::ThreadPool>(threads);
  return *p;
}

size_t buffer_bytes() {
  const char* env = std::getenv("QS_BENCH_BUFFER_MB");
  const size_t mb = env != nullptr ? std::strtoull(env, nullptr, 10) : 1024;
  return std::max<size_t>(mb, 64) << 20;
}

const std::vector<uint64_t>& read_buffer() {
  static const std::vector<uint64_t> buffer = [] {
    std::vector<uint64_t> b(buffer_bytes() / sizeof(uint64_t));
    for (size_t i = 0; i < b.size(); ++i) b[i] = i * 0x9E3779B97F4A7C15ULL;
    return b;
  }();
  return buffer;
}

#if defined(__x86_64__)
// Sum of words [16 begin, 16 end) of p, 32 bytes at a time into 4 independent accumulators (AVX2:
// the portable build compiles this one function for AVX2; called only when the CPU has it).
__attribute__((target("avx2"))) uint64_t sum_words_avx2(const uint64_t* words, int64_t begin, int64_t end) {
  const auto* p = reinterpret_cast<const __m256i*>(words);
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (int64_t i = begin; i < end; ++i) {  // 16 words (128 bytes) per step
    a = _mm256_add_epi64(a, _mm256_loadu_si256(p + 4 * i));
    b = _mm256_add_epi64(b, _mm256_loadu_si256(p + 4 * i + 1));
    c = _mm256_add_epi64(c, _mm256_loadu_si256(p + 4 * i + 2));
    d = _mm256_add_epi64(d, _mm256_loadu_si256(p + 4 * i + 3));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

// Sum of all words, split over the pool's threads. Returns the sum so the reads are not elided.
// With AVX2 the words are read 32 bytes at a time: a scalar 8-byte loop is bound by load
// instructions (~24 GB/s per core), not by memory.
uint64_t parallel_sum(qs::ThreadPool& pool) {
  const std::vector<uint64_t>& buf = read_buffer();
  std::vector<uint64_t> partial(static_cast<size_t>(pool.n_threads()) * 8, 0);
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
#else
  [[maybe_unused]] const bool avx2 = false;
#endif
  pool.parallel_for(static_cast<int64_t>(buf.size() / 16), [&](int64_t begin, int64_t end, int t) {
    uint64_t total = 0;
#if defined(__x86_64__)
    if (avx2) {
      total = sum_words_avx2(buf.data(), begin, end);
    } else
#endif
    {
      for (int64_t i = 16 * begin; i < 16 * end; ++i) total += buf[i];
    }
    partial[static_cast<size_t>(t) * 8] = total;  // one cache line per thread
  });
  uint64_t s = 0;
  for (uint64_t v : partial) s += v;
  return s;
}

/// Wall time summed over the timed calls (counters below are plain numbers, not "/s" rates).
struct Timer {
  std::chrono::steady_clock::time_point t0;
  double seconds = 0;
  void start() { t0 = std::chrono::steady_clock::now(); }
  void stop() { seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

/// Best-of-3 read bandwidth in GB/s with `threads` threads (cached per thread count).
double read_bandwidth_gbps(int threads) {
  static std::map<int, double> cache;
  if (auto it = cache.find(threads); it != cache.end()) return it->second;
  qs::ThreadPool& pool = pool_for(threads);
  parallel_sum(pool);  // first touch
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(parallel_sum(pool));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(read_buffer().size() * sizeof(uint64_t)) / s / 1e9);
  }
  cache[threads] = best;
  return best;
}

void BM_ReadBandwidth(benchmark::State& state) {
  qs::ThreadPool& pool = pool_for(static_cast<int>(state.range(0)));
  parallel_sum(pool);
  Timer timer;
  for (auto _ : state) {
    timer.start();
    benchmark::DoNotOptimize(parallel_sum(pool));
    timer.stop();
  }
  const double bytes = static_cast<double>(read_buffer().size() * sizeof(uint64_t));
  state.counters["GB_per_s"] = bytes * static_cast<double>(state.iterations()) / timer.seconds / 1e9;
}

/// `copies` matrices [rows, cols] of `type` holding quantized N(0, 1) values.
struct Weights {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<qs::TensorView> views;
};

Weights make_weights(DType type, int64_t rows, int64_t cols, int copies) {
  Weights w;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t row_bytes = qs::row_bytes(type, cols);
  for (int c = 0; c < copies; ++c) {
    auto& b = w.bytes.emplace_back(row_bytes * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      if (c == 0 || r < 4) {  // later copies reuse row data (only the bytes read matter)
        for (float& v : row) v = normal(rng);
        qs::quantize_row(type, row.data(), b.data() + r * row_bytes, cols);
      } else {
        std::copy_n(w.bytes[0].data() + r * row_bytes, row_bytes, b.data() + r * row_bytes);
      }
    }
  }
  for (auto& b : w.bytes) {
    w.views.push_back(qs::TensorView{"w", type, {rows, cols}, b.data(), b.size()});
  }
  return w;
}

/// Times one-token products y = W x cycling through `views` (each `bytes` of weights, so no cache
/// reuse between iterations) and sets the GB_per_s, pct_of_read_bw and read_bw_GB_per_s counters.
void run_gemv(benchmark::State& state, const std::vector<qs::TensorView>& views, size_t bytes, int threads) {
  const int64_t rows = views.front().rows(), cols = views.front().cols();
  qs::ThreadPool& pool = pool_for(threads);
  qs::kernels::MatmulScratch scratch(threads, cols, 1);
  std::vector<float> x(static_cast<size_t>(cols), 0.5f), y(static_cast<size_t>(rows));
  size_t i = 0;
  Timer timer;
  for (auto _ : state) {
    timer.start();
    qs::kernels::matmul(views[i++ % views.size()], x.data(), 1, y.data(), pool, scratch);
    benchmark::ClobberMemory();
    timer.stop();
  }
  const double gbps = static_cast<double>(bytes) * static_cast<double>(state.iterations()) / timer.seconds / 1e9;
  const double read_bw = read_bandwidth_gbps(threads);
  state.counters["GB_per_s"] = gbps;
  state.counters["pct_of_read_bw"] = 100.0 * gbps / read_bw;
  state.counters["read_bw_GB_per_s"] = read_bw;
}

void BM_Gemv(benchmark::State& state, DType type) {
  constexpr int64_t kRows = 9728, kCols = 2560;
  const int threads = static_cast<int>(state.range(0));
  const size_t one = qs::row_bytes(type, kCols) * kRows;
  const int copies = static_cast<int>(std::max<size_t>(1, ((256u << 20) + one - 1) / one));
  const Weights w = make_weights(type, kRows, kCols, copies);
  run_gemv(state, w.views, one, threads);
  state.counters["weight_MB"] = static_cast<double>(one) / 1e6;
}

/// `copies` packed matrices [rows, cols] of `type` (random quantized values) in one anonymous
/// mapping advised for huge pages, like the CPU backend's packed arena. Unmapped on destruction.
struct PackedWeights {
  uint8_t* arena = nullptr;
  size_t bytes = 0;
  std::vector<qs::TensorView> views;
  ~PackedWeights() {
    if (arena != nullptr) ::munmap(arena, bytes);
  }
};

std::unique_ptr<PackedWeights> make_packed_weights(DType type, int64_t rows, int64_t cols, int copies) {
  const Weights src = make_weights(type, rows, cols, 1);
  auto w = std::make_unique<PackedWeights>();
  const size_t one = (qs::kernels::packed_matrix_bytes(type, rows, cols) + 4095) / 4096 * 4096;
  w->bytes = one * static_cast<size_t>(copies);
  void* p = ::mmap(nullptr, w->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
  ::madvise(p, w->bytes, MADV_HUGEPAGE);
  w->arena = static_cast<uint8_t*>(p);
  const int64_t groups = (rows + qs::kernels::kPackedRows - 1) / qs::kernels::kPackedRows;
  for (int c = 0; c < copies; ++c) {
    uint8_t* dst = w->arena + one * static_cast<size_t>(c);
    qs::kernels::pack_rows16(type, src.bytes[0].data(), rows, cols, 0, groups, dst);
    qs::TensorView v{"w", type, {rows, cols}, dst, qs::kernels::packed_matrix_bytes(type, rows, cols)};
    v.layout = qs::TensorLayout::kPackedRows16;
    w->views.push_back(v);
  }
  return w;
}

void BM_GemvPacked(benchmark::State& state, DType type) {
  if (qs::kernels::active_dot_kernels().packed_gemm(type) == nullptr) {
    state.SkipWithError("no packed kernels for this type on this CPU (they need AVX-512 VNNI)");
    return;
  }
  constexpr int64_t kRows = 9728, kCols = 2560;
  const int threads = static_cast<int>(state.range(0));
  const size_t one = qs::kernels::packed_matrix_bytes(type, kRows, kCols);
  const int copies = static_cast<int>(std::max<size_t>(1, ((256u << 20) + one - 1) / one));
  const auto w = make_packed_weights(type, kRows, kCols, copies);
  run_gemv(state, w->views, one, threads);
}

void BM_Gemm(benchmark::State& state, DType type) {
  constexpr int64_t kRows = 2560, kCols = 2560;
  const int64_t tokens = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const Weights w = make_weights(type, kRows, kCols, 1);
  qs::ThreadPool& pool = pool_for(threads);
  qs::kernels::MatmulScratch scratch(threads, kCols, tokens);
  std::vector<float> x(static_cast<size_t>(tokens * kCols)), y(static_cast<size_t>(tokens * kRows));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  Timer timer;
  for (auto _ : state) {
    timer.start();
    qs::kernels::matmul(w.views[0], x.data(), tokens, y.data(), pool, scratch);
    benchmark::ClobberMemory();
    timer.stop();
  }
  const double flops = 2.0 * static_cast<double>(tokens * kRows * kCols);
  state.counters["GFLOP_per_s"] = flops * static_cast<double>(state.iterations()) / timer.seconds / 1e9;
}

void BM_PrefillAttention(benchmark::State& state) {
  constexpr int64_t kHeads = 32, kKvHeads = 8, kDim = 128;
  const int64_t tokens = state.range(0);
  const int tile = static_cast<int>(state.range(1));
  const int64_t n_blocks = (tokens + qs::kKvBlockSize - 1) / qs::kKvBlockSize;
  const size_t row = qs::row_bytes(DType::F16, kDim);
  std::vector<uint8_t> k(static_cast<size_t>(n_blocks * kKvHeads * qs::kKvBlockSize) * row), v(k.size());
  qs::kernels::KvLayerView kv;
  kv.k = k.data();
  kv.v = v.data();
  kv.element_type = DType::F16;
  kv.row_bytes = row;
  kv.n_kv_heads = kKvHeads;
  kv.head_dim = kDim;
  std::vector<int32_t> block_table(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) block_table[b] = static_cast<int32_t>(n_blocks - 1 - b);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> kv_row(kKvHeads * kDim);
  for (int64_t p = 0; p < tokens; ++p) {
    for (float& x : kv_row) x = normal(rng);
    qs::kernels::kv_store(kv, static_cast<int32_t>(block_table[p / 16] * 16 + p % 16), kv_row.data(), kv_row.data());
  }
  std::vector<float> q(static_cast<size_t>(tokens * kHeads * kDim)), out(q.size());
  for (float& x : q) x = normal(rng);
  std::vector<int64_t> context(static_cast<size_t>(tokens));
  for (int64_t p = 0; p < tokens; ++p) context[p] = p + 1;
  const qs::kernels::AttentionShape shape{kHeads, kKvHeads, kDim};
  const int64_t q_dim = kHeads * kDim;
  for (auto _ : state) {
    for (int64_t t0 = 0; t0 < tokens; t0 += tile) {
      const int n = static_cast<int>(std::min<int64_t>(tile, tokens - t0));
      qs::kernels::paged_attention_tile(&q[t0 * q_dim], q_dim, n, &context[t0], shape, kv, block_table.data(),
                                        &out[t0 * q_dim], q_dim);
    }
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * kHeads * kDim * static_cast<double>(tokens) * static_cast<double>(tokens + 1) / 2.0;
  state.counters["GFLOP_per_s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                     benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int64_t> thread_counts;
  for (int t = 1; t <= max_threads; t *= 2) thread_counts.push_back(t);
  if (thread_counts.back() != max_threads) thread_counts.push_back(max_threads);

  auto* bw = benchmark::RegisterBenchmark("ReadBandwidth", BM_ReadBandwidth);
  for (int64_t t : thread_counts) bw->Arg(t);
  bw->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);

  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                         DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  for (DType type : types) {
    const std::string name(qs::dtype_name(type));
    auto* gemv = benchmark::RegisterBenchmark(("Gemv/" + name).c_str(), BM_Gemv, type);
    for (int64_t t : thread_counts) gemv->Arg(t);
    gemv->ArgName("threads")->UseRealTime()->Unit(benchmark::kMicrosecond);
    if (qs::kernels::packable_dtype(type)) {
      auto* packed = benchmark::RegisterBenchmark(("GemvPacked/" + name).c_str(), BM_GemvPacked, type);
      for (int64_t t : thread_counts) packed->Arg(t);
      packed->ArgName("threads")->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
    auto* gemm = benchmark::RegisterBenchmark(("Gemm/" + name).c_str(), BM_Gemm, type);
    for (int64_t t : thread_counts) {
      for (int64_t tokens : {1, 2, 3, 4, 5, 6, 8, 16, 64, 512}) gemm->Args({tokens, t});  // decode, verify steps .. prefill
    }
    gemm->ArgNames({"tokens", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  auto* attention = benchmark::RegisterBenchmark("PrefillAttention", BM_PrefillAttention);
  for (int64_t tokens : {512, 2048}) {
    for (int64_t tile : {int64_t{1}, int64_t{qs::kernels::kMaxQueryTile}}) attention->Args({tokens, tile});
  }
  attention->ArgNames({"tokens", "tile"})->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
