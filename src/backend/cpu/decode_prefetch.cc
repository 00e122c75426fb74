#include "backend/cpu/decode_prefetch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/packed_rows.h"
#include "core/stats.h"

namespace qs {

namespace {
constexpr size_t kMinPackedBytes = size_t{256} << 20;
constexpr size_t kPassBytes = size_t{512} << 20;
constexpr int kTimedPasses = 5;
constexpr double kMinGain = 0.95;  // off only when its median <= 0.95 x the median with prefetch

}  // namespace

std::string DecodePrefetchChoice::describe() const {
  char buf[160];
  if (measured) {
    std::snprintf(buf, sizeof buf, "decode prefetch %s (one-token matmuls over %.0f MiB: %.1f ms without, %.1f ms with)",
                  prefetch ? "on" : "off", sampled_mib, ms_without, ms_with);
  } else {
    std::snprintf(buf, sizeof buf, "decode prefetch %s", prefetch ? "on" : "off");
  }
  return buf;
}

DecodePrefetchChoice choose_decode_prefetch(const ModelWeights& weights, ThreadPool& pool,
                                            kernels::MatmulScratch& scratch) {
  DecodePrefetchChoice choice;
  if (const char* env = std::getenv("QS_CPU_DECODE_PREFETCH"); env != nullptr && *env != '\0') {
    choice.prefetch = std::strcmp(env, "0") != 0;
    kernels::set_packed_decode_prefetch(choice.prefetch);
    return choice;
  }
  choice.prefetch = kernels::packed_decode_prefetch();
  std::vector<const TensorView*> sample;
  size_t total = 0, sampled = 0;
  int64_t max_in = 0, max_out = 0;
  for (const LayerWeights& l : weights.layers) {
    for (const TensorView* t : {l.q_proj, l.k_proj, l.v_proj, l.o_proj, l.gate_proj, l.up_proj, l.down_proj}) {
      if (t == nullptr || t->layout != TensorLayout::kPackedRows16) continue;
      total += t->size_bytes;
      if (sampled >= kPassBytes) continue;
      sample.push_back(t);
      sampled += t->size_bytes;
      max_in = std::max(max_in, t->cols());
      max_out = std::max(max_out, t->rows());
    }
  }
  if (total < kMinPackedBytes || sample.empty() || max_in > scratch.max_in_features()) return choice;
  std::vector<float> x(static_cast<size_t>(max_in), 0.25f), y(static_cast<size_t>(max_out));
  auto pass = [&](bool prefetch) {
    kernels::set_packed_decode_prefetch(prefetch);
    const auto t0 = std::chrono::steady_clock::now();
    for (const TensorView* t : sample) kernels::matmul(*t, x.data(), 1, y.data(), pool, scratch);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  pass(true);
  pass(false);
  std::vector<double> with, without;
  for (int i = 0; i < kTimedPasses; ++i) {
    with.push_back(pass(true));
    without.push_back(pass(false));
  }
  choice.measured = true;
  choice.ms_with = median(with);
  choice.ms_without = median(without);
  choice.sampled_mib = static_cast<double>(sampled) / (1 << 20);
  choice.prefetch = !(choice.ms_without <= kMinGain * choice.ms_with);
  kernels::set_packed_decode_prefetch(choice.prefetch);
  return choice;
}

}  // namespace qs
