#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/sequence_runner.h"
#include "kv/kv_types.h"

namespace qs {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

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
  const int64_t context = backend_.limits().max_context_tokens;
  if (n_prompt == 0) throw Error("the prompt is empty");
  if (n_prompt >= context) {
    throw Error("prompt of " + std::to_string(n_prompt) + " tokens does not fit the context of " +
                std::to_string(context) + " tokens");
  }
  const int64_t max_new = std::min<int64_t>(options.max_tokens, context - n_prompt);
  const int64_t need_blocks = kv_blocks_for_context(n_prompt + max_new);
  if (need_blocks > backend_.kv_blocks()) {
    throw Error("KV cache too small: " + std::to_string(n_prompt + max_new) + " tokens need " +
                std::to_string(need_blocks) + " blocks, " + std::to_string(backend_.kv_blocks()) + " available");
  }
  validate(options.sampling, backend_.vocab_rows());
  SequenceSampling sampling;
  sampling.params = options.sampling;
  sampling.seed = options.sampling.seed.has_value() ? *options.sampling.seed : random_seed();
  const bool greedy = sampling.params.temperature == 0.0f || sampling.params.top_k == 1;
  SequenceRunner sequence(backend_);
  GenerationResult result;
  result.prompt_tokens = n_prompt;

  const auto start = Clock::now();
  int32_t token = sequence.append(prompt_ids, &sampling);
  result.prefill_ms = ms_since(start);

  auto decode_start = Clock::now();
  for (int64_t step = 0; step < max_new; ++step) {
    if (step > 0) token = sequence.append(std::span<const int32_t>(&result.output_ids.back(), 1), &sampling);
    if (!greedy) ++sampling.draws;
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
  }
  if (result.finish_reason.empty()) result.finish_reason = "length";
  result.decode_ms = result.output_ids.size() > 1 ? ms_since(decode_start) : 0.0;
  return result;
}

}  // namespace qs
