#include "engine/ttft_predictor.h"

#include <algorithm>
#include <cmath>

namespace qs {
namespace {

int64_t sum_up_to(const std::vector<std::pair<int32_t, int64_t>>& by_priority, int32_t priority) {
  int64_t n = 0;
  for (const auto& [p, v] : by_priority) {
    if (p <= priority) n += v;
  }
  return n;
}

}  // namespace

double predict_ttft_s(const LoadSnapshot& load, int64_t prompt_tokens, int32_t priority, int64_t n_choices) {
  if (load.prefill_token_s <= 0) return 0;
  const double own = std::max(1.0, static_cast<double>(prompt_tokens) * (1.0 - std::clamp(load.prefix_hit_ratio, 0.0, 1.0))) *
                     static_cast<double>(std::max<int64_t>(n_choices, 1));
  const double ahead = static_cast<double>(load.running_prefill_tokens + sum_up_to(load.waiting_tokens_by_priority, priority) +
                                           load.incoming_tokens);
  const auto time_for = [&](double work) {
    double t = work * load.prefill_token_s;
    if (load.running > 0 && load.decode_step_s > 0) {
      t += std::ceil(work / static_cast<double>(std::max<int64_t>(load.prefill_tokens_per_step, 1))) * load.decode_step_s;
    }
    return t;
  };
  const double prefill = time_for(ahead + own);
  // Sequences that must start before this one, against the free slots.
  const int64_t seqs_ahead = sum_up_to(load.waiting_count_by_priority, priority) + load.incoming_sequences;
  const int64_t free_slots = std::max<int64_t>(load.max_num_seqs - load.running, 0);
  double slot_wait = 0;
  if (seqs_ahead + 1 > free_slots && !load.running_remaining_tokens.empty()) {
    const auto k = static_cast<size_t>(seqs_ahead + 1 - free_slots);
    const auto& rem = load.running_remaining_tokens;
    const int64_t tokens = rem[std::min(k, rem.size()) - 1];
    slot_wait = static_cast<double>(tokens) * load.decode_step_s;
    if (k > rem.size()) slot_wait *= static_cast<double>(k) / static_cast<double>(rem.size());  // further rounds
  }
  return std::max(prefill, slot_wait + time_for(own));
}

}  // namespace qs
