#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/draft_length.h"
#include "engine/draft_model_proposer.h"
#include "engine/sequence_runner.h"
#include "sampling/rejection_sampler.h"
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
  const std::unique_ptr<DraftProposer> proposer = make_draft_proposer(options.spec, backend_, draft_backend_);
  SequenceRunner sequence(backend_);
  GenerationResult result;
  result.prompt_tokens = n_prompt;

  const auto start = Clock::now();
  int32_t token = sequence.append(prompt_ids, &sampling);
  result.prefill_ms = ms_since(start);

  auto decode_start = Clock::now();
  std::vector<int32_t> history(prompt_ids);  // prompt + output: the drafts' source
  // Takes one sampled token; true when generation ends with it.
  const auto emit = [&](int32_t t) {
    if (!greedy) ++sampling.draws;
    result.output_ids.push_back(t);
    history.push_back(t);
    if (result.output_ids.size() == 1) {
      result.ttft_ms = ms_since(start);
      decode_start = Clock::now();
    }
    on_token(t);
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), t) != options.stop_token_ids.end()) {
      result.finish_reason = "stop";
      return true;
    }
    return static_cast<int64_t>(result.output_ids.size()) >= max_new;
  };
  const int64_t max_batch = backend_.limits().max_batch_tokens;
  std::vector<int32_t> drafts;
  std::vector<float> draft_probs;  // sampled drafts' q (draft model, non-greedy): [drafts, vocab]
  std::vector<int32_t> sampled;
  // --spec-adaptive (engine/draft_length.h): this sequence's acceptance and the learned cost of its
  // decode and verify steps (engine/step_costs.h, one logits row, drafts priced as prefill tokens;
  // a step is timed from before its drafts are proposed, as in the engine).
  AcceptanceEstimate acceptance;
  StepCosts costs(1);
  int32_t steps_below_max = 0;
  bool done = max_new < 1 || emit(token);
  while (!done) {
    // Drafts: never past max_tokens (the token after them is sampled too) or the context.
    const int64_t room = std::min({max_new - static_cast<int64_t>(result.output_ids.size()) - 1,
                                   context - sequence.n_tokens() - 1, max_batch - 1});
    int32_t k = options.spec.drafts_for_room(room);
    const auto step_start = Clock::now();
    if (proposer && k >= 1 && options.spec.adaptive) {
      const double a = acceptance.rate();
      const int32_t k_max = k;
      adaptive_draft_lengths(costs, std::span<const double>(&a, 1), std::span<const int32_t>(&k_max, 1),
                             std::span<int32_t>(&steps_below_max, 1), std::span<int32_t>(&k, 1));
    }
    drafts.clear();
    draft_probs.clear();
    if (proposer && k >= 1) {
      const DraftRequest ask{1, history, k, &drafts, n_prompt, &sampling, &draft_probs};
      const auto propose_start = Clock::now();
      proposer->propose(std::span<const DraftRequest>(&ask, 1));
      result.spec_propose_ms += ms_since(propose_start);
      ++result.spec_propose_steps;
    }
    ++result.decode_steps;
    if (drafts.empty()) {
      token = sequence.append(std::span<const int32_t>(&result.output_ids.back(), 1), &sampling);
      costs.record(1, 0, ms_since(step_start) / 1e3);
      done = emit(token);
      continue;
    }
    const int64_t computed = sequence.n_tokens();
    const std::span<const int32_t> rows = sequence.verify(result.output_ids.back(), drafts, &sampling, draft_probs);
    costs.record(1, static_cast<int64_t>(drafts.size()), ms_since(step_start) / 1e3);
    sampled.assign(rows.begin(), rows.end());
    const int32_t accepted = count_accepted(drafts, sampled);
    acceptance.record(static_cast<int64_t>(drafts.size()), accepted);
    sequence.truncate(computed + 1 + accepted);  // the last token and the accepted drafts
    result.spec_draft_tokens += static_cast<int64_t>(drafts.size());
    result.spec_accepted_tokens += accepted;
    for (int32_t j = 0; j <= accepted && !done; ++j) done = emit(sampled[static_cast<size_t>(j)]);
  }
  if (result.finish_reason.empty()) result.finish_reason = "length";
  result.decode_ms = result.output_ids.size() > 1 ? ms_since(decode_start) : 0.0;
  return result;
}

}  // namespace qs
