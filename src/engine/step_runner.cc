#include "engine/step_runner.h"

#include <chrono>
#include <string>

#include "core/error.h"

namespace qs {

StepRunner::StepRunner(Backend& backend) : backend_(backend) { clear(); }

void StepRunner::clear() {
  builder_.clear();
  sampling_.clear();
  sampling_.vocab_rows = backend_.vocab_rows();
  n_tokens_ = 0;
}

int32_t StepRunner::add(const StepSequence& seq) {
  const auto n_total = static_cast<int64_t>(seq.tokens.size());
  if (seq.n < 1 || seq.first < 0 || seq.first + seq.n > n_total) {
    throw Error("StepRunner: chunk [" + std::to_string(seq.first) + ", " + std::to_string(seq.first + seq.n) +
                ") outside a sequence of " + std::to_string(n_total) + " tokens");
  }
  if (!seq.allowed_mask.empty() && static_cast<int32_t>(seq.allowed_mask.size()) != sampling_.mask_words()) {
    throw Error("StepRunner: allowed-token mask of " + std::to_string(seq.allowed_mask.size()) + " words, expected " +
                std::to_string(sampling_.mask_words()));
  }
  const auto vocab = static_cast<size_t>(sampling_.vocab_rows);
  if (!seq.draft_probs.empty() &&
      (seq.n_logits < 2 || seq.draft_probs.size() != static_cast<size_t>(seq.n_logits - 1) * vocab)) {
    throw Error("StepRunner: " + std::to_string(seq.draft_probs.size()) + " draft probabilities for " +
                std::to_string(std::max(0, seq.n_logits - 1)) + " drafts of " + std::to_string(vocab) + " tokens");
  }
  builder_.add_sequence(seq.tokens.subspan(static_cast<size_t>(seq.first), static_cast<size_t>(seq.n)),
                        static_cast<int32_t>(seq.first), seq.block_table, seq.n_logits);
  n_tokens_ += seq.n;
  const auto first_row = static_cast<int32_t>(sampling_.rows.size());
  if (seq.n_logits == 0) return first_row;

  SamplingRow base;
  base.seq_id = seq.seq_id;
  base.want_logits = seq.want_logits;
  base.want_probs = seq.want_probs;
  if (seq.sampling != nullptr) {
    const SamplingParams& p = seq.sampling->params;
    base.temperature = p.temperature;
    base.top_k = p.top_k;
    base.top_p = p.top_p;
    base.min_p = p.min_p;
    base.repetition_penalty = p.repetition_penalty;
    base.presence_penalty = p.presence_penalty;
    base.frequency_penalty = p.frequency_penalty;
    base.seed = seq.sampling->seed;
    base.draws = seq.sampling->draws;
    base.n_logprobs = seq.sampling->n_logprobs;
    base.bias_begin = static_cast<int64_t>(sampling_.bias_ids.size());
    base.bias_len = static_cast<int64_t>(p.logit_bias.size());
    for (const auto& [id, bias] : p.logit_bias) {
      sampling_.bias_ids.push_back(id);
      sampling_.bias_values.push_back(bias);
    }
  } else {
    base.temperature = 0.0f;
  }
  const bool greedy = base.temperature == 0.0f || base.top_k == 1;
  const bool repetition = base.repetition_penalty != 1.0f;
  const bool output_penalty = base.presence_penalty != 0.0f || base.frequency_penalty != 0.0f;
  if (!seq.allowed_mask.empty()) {
    base.mask_row = static_cast<int32_t>(sampling_.allowed_mask.size() / sampling_.mask_words());
    sampling_.allowed_mask.insert(sampling_.allowed_mask.end(), seq.allowed_mask.begin(), seq.allowed_mask.end());
  } else if (seq.mask_later) {
    // One row per logits row: verified draft positions each get the grammar state they reach.
    base.mask_row = static_cast<int32_t>(sampling_.allowed_mask.size() / sampling_.mask_words());
    sampling_.allowed_mask.resize(
        sampling_.allowed_mask.size() + static_cast<size_t>(seq.n_logits) * static_cast<size_t>(sampling_.mask_words()), ~0u);
  }
  const bool verify_sampled = !greedy && !seq.draft_probs.empty();
  const auto first_draft_row = static_cast<int32_t>(sampling_.draft_probs.size() / std::max<size_t>(1, vocab));
  if (verify_sampled) sampling_.draft_probs.insert(sampling_.draft_probs.end(), seq.draft_probs.begin(), seq.draft_probs.end());
  for (int32_t j = 0; j < seq.n_logits; ++j) {
    SamplingRow row = base;
    // Row j samples the token after position (first + n - n_logits + j): its history ends there.
    const int64_t history_end = seq.first + seq.n - seq.n_logits + j + 1;
    if (repetition || output_penalty) {
      const auto begin = static_cast<int64_t>(sampling_.history.size());
      sampling_.history.insert(sampling_.history.end(), seq.tokens.begin(), seq.tokens.begin() + history_end);
      const int64_t n_prompt = std::min(seq.n_prompt, history_end);
      if (repetition) {
        row.prompt_begin = begin;
        row.prompt_len = n_prompt;
      }
      row.output_begin = begin + n_prompt;
      row.output_len = history_end - n_prompt;
    }
    if (!greedy) row.draws += static_cast<uint64_t>(j);
    if (verify_sampled && j + 1 < seq.n_logits) {  // row j verifies draft j, the token after its history
      row.draft_token = seq.tokens[static_cast<size_t>(history_end)];
      row.draft_probs_row = first_draft_row + j;
    }
    if (seq.mask_later && seq.allowed_mask.empty()) row.mask_row = base.mask_row + j;
    if (history_end - seq.n_prompt < seq.min_tokens && !seq.stop_token_ids.empty()) {
      // This row's own bias range: the request's logit_bias, then the suppressed stop ids.
      const auto begin = static_cast<int64_t>(sampling_.bias_ids.size());
      for (int64_t b = base.bias_begin; b < base.bias_begin + base.bias_len; ++b) {
        sampling_.bias_ids.push_back(sampling_.bias_ids[static_cast<size_t>(b)]);
        sampling_.bias_values.push_back(sampling_.bias_values[static_cast<size_t>(b)]);
      }
      for (const int32_t id : seq.stop_token_ids) {
        if (id < 0 || id >= sampling_.vocab_rows) continue;
        sampling_.bias_ids.push_back(id);
        sampling_.bias_values.push_back(kSuppressLogitBias);
      }
      row.bias_begin = begin;
      row.bias_len = static_cast<int64_t>(sampling_.bias_ids.size()) - begin;
    }
    sampling_.rows.push_back(row);
  }
  return first_row;
}

const StepOutput& StepRunner::run() {
  launch();
  return wait();
}

void StepRunner::launch() {
  builder_.build(batch_);
  launch_start_ = std::chrono::steady_clock::now();
  backend_.launch(batch_, sampling_, output_);
}

const StepOutput& StepRunner::wait() {
  backend_.wait();
  last_forward_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - launch_start_).count();
  return output_;
}

std::span<uint32_t> StepRunner::mask_row(int32_t row) {
  if (row < 0 || row >= static_cast<int32_t>(sampling_.rows.size())) return {};
  const int32_t m = sampling_.rows[static_cast<size_t>(row)].mask_row;
  if (m < 0) return {};
  const auto words = static_cast<size_t>(sampling_.mask_words());
  return {sampling_.allowed_mask.data() + static_cast<size_t>(m) * words, words};
}

}  // namespace qs
