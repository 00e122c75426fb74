#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "sampling/sampler.h"

namespace qs {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Returns blocks to the pool on every exit path.
struct ScopedBlockTable {
  BlockTable table;
  BlockPool& pool;
  ~ScopedBlockTable() { table.release_all(pool); }
};

}  // namespace

double GenerationResult::prefill_tokens_per_second() const {
  return prefill_ms > 0 ? static_cast<double>(prompt_tokens) * 1000.0 / prefill_ms : 0.0;
}
double GenerationResult::decode_tokens_per_second() const {
  const size_t n = output_ids.size();
  return (n > 1 && decode_ms > 0) ? static_cast<double>(n - 1) * 1000.0 / decode_ms : 0.0;
}

GenerationResult Generator::run(const std::vector<int32_t>& prompt_ids,
                                const GenerationOptions& options,
                                const std::function<void(int32_t)>& on_token) {
  const int64_t n_prompt = static_cast<int64_t>(prompt_ids.size());
  const int64_t context = runner_.max_context_tokens();
  if (n_prompt == 0) throw Error("the prompt is empty");
  if (n_prompt >= context) {
    throw Error("prompt of " + std::to_string(n_prompt) + " tokens does not fit the context of " +
                std::to_string(context) + " tokens");
  }
  const int64_t max_new = std::min<int64_t>(options.max_tokens, context - n_prompt);
  ScopedBlockTable blocks{BlockTable{}, cache_.pool()};
  if (!blocks.table.reserve(static_cast<int32_t>(n_prompt + max_new), cache_.pool())) {
    throw Error("KV cache too small: " + std::to_string(n_prompt + max_new) + " tokens need " +
                std::to_string(KvCache::blocks_for_context(n_prompt + max_new)) + " blocks, " +
                std::to_string(cache_.pool().n_free()) + " free");
  }
  const int32_t vocab = static_cast<int32_t>(runner_.config().vocab_size);
  Sampler sampler(options.sampling, vocab);
  std::vector<float> logits(static_cast<size_t>(vocab));
  GenerationResult result;
  result.prompt_tokens = n_prompt;
  Batch batch;

  const auto start = Clock::now();
  for (int64_t begin = 0; begin < n_prompt; begin += runner_.max_batch_tokens()) {
    const int64_t n = std::min(runner_.max_batch_tokens(), n_prompt - begin);
    batch.clear();
    batch.sequences.push_back({&blocks.table.blocks()});
    batch.add_tokens(0, prompt_ids.data() + begin, n, static_cast<int32_t>(begin),
                     begin + n == n_prompt);
    runner_.forward(batch, logits.data());
  }
  result.prefill_ms = ms_since(start);

  auto decode_start = Clock::now();
  for (int64_t step = 0; step < max_new; ++step) {
    const int32_t token = sampler.sample(logits, prompt_ids, result.output_ids);
    result.output_ids.push_back(token);
    if (step == 0) {
      result.ttft_ms = ms_since(start);
      decode_start = Clock::now();
    }
    on_token(token);
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) !=
        options.stop_token_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
    if (step + 1 == max_new) break;
    batch.clear();
    batch.sequences.push_back({&blocks.table.blocks()});
    batch.add_tokens(0, &token, 1, static_cast<int32_t>(n_prompt + step), true);
    runner_.forward(batch, logits.data());
  }
  if (result.finish_reason.empty()) result.finish_reason = "length";
  result.decode_ms = result.output_ids.size() > 1 ? ms_since(decode_start) : 0.0;
  return result;
}

}  // namespace qs
