#include "backend/cpu/cpu_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>

#include "core/error.h"
#include "sampling/logits_processing.h"
#include "sampling/rejection_sampler.h"

namespace qs {
namespace {

SamplingParams params_of(const SamplingBatch& sampling, const SamplingRow& row) {
  SamplingParams p;
  p.temperature = row.temperature;
  p.top_k = row.top_k;
  p.top_p = row.top_p;
  p.min_p = row.min_p;
  p.repetition_penalty = row.repetition_penalty;
  p.presence_penalty = row.presence_penalty;
  p.frequency_penalty = row.frequency_penalty;
  for (int64_t i = row.bias_begin; i < row.bias_begin + row.bias_len; ++i) {
    p.logit_bias.emplace_back(sampling.bias_ids[i], sampling.bias_values[i]);
  }
  p.seed = row.seed;
  return p;
}

bool same_params(const SamplingParams& a, const SamplingParams& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
         a.repetition_penalty == b.repetition_penalty && a.presence_penalty == b.presence_penalty &&
         a.frequency_penalty == b.frequency_penalty && a.logit_bias == b.logit_bias && a.seed == b.seed;
}

std::span<const int32_t> history_range(const SamplingBatch& sampling, int64_t begin, int64_t len) {
  if (len <= 0) return {};
  if (begin < 0 || begin + len > static_cast<int64_t>(sampling.history.size())) {
    throw Error("sampling: token history range outside SamplingBatch::history");
  }
  return {sampling.history.data() + begin, static_cast<size_t>(len)};
}

}  // namespace

Sampler& CpuSampler::sampler_for(const SamplingBatch& sampling, const SamplingRow& row) {
  if (row.bias_begin < 0 || row.bias_len < 0 ||
      row.bias_begin + row.bias_len > static_cast<int64_t>(sampling.bias_ids.size()) ||
      sampling.bias_ids.size() != sampling.bias_values.size()) {
    throw Error("sampling: logit bias range outside SamplingBatch::bias_ids");
  }
  const SamplingParams params = params_of(sampling, row);
  Entry& entry = samplers_[row.seq_id];
  if (!entry.sampler || entry.seed != row.seed || entry.draws != row.draws ||
      !same_params(entry.sampler->params(), params)) {
    entry.sampler = std::make_unique<Sampler>(params, sampling.vocab_rows);
    entry.sampler->discard(row.draws);
    entry.seed = row.seed;
    entry.draws = row.draws;
  }
  entry.used = true;
  return *entry.sampler;
}

void CpuSampler::sample(const SamplingBatch& sampling, float* logits, StepOutput& out) {
  const size_t n_rows = sampling.rows.size();
  const auto vocab = static_cast<size_t>(sampling.vocab_rows);
  out.clear();
  out.sampled.assign(n_rows, -1);
  out.sampled_logprob.assign(n_rows, 0.0f);
  out.top_begin.assign(n_rows, 0);
  out.top_len.assign(n_rows, 0);
  out.logits_row.assign(n_rows, -1);
  out.probs_row.assign(n_rows, -1);
  size_t n_logits_rows = 0;
  size_t n_probs_rows = 0;
  for (const SamplingRow& row : sampling.rows) {
    n_logits_rows += row.want_logits ? 1 : 0;
    n_probs_rows += row.want_probs ? 1 : 0;
  }
  out.logits.resize(n_logits_rows * vocab);
  out.probs.resize(n_probs_rows * vocab);
  const size_t n_draft_rows = sampling.draft_probs.size() / std::max<size_t>(1, vocab);
  int32_t next_probs_row = 0;
  const size_t n_mask_rows = sampling.allowed_mask.size() / std::max<size_t>(1, sampling.mask_words());
  int32_t next_logits_row = 0;
  for (auto& [id, entry] : samplers_) entry.used = false;

  for (size_t r = 0; r < n_rows; ++r) {
    const SamplingRow& row = sampling.rows[r];
    std::span<float> l(logits + r * vocab, vocab);
    if (row.want_logits) {
      std::memcpy(out.logits.data() + static_cast<size_t>(next_logits_row) * vocab, l.data(), vocab * sizeof(float));
      out.logits_row[r] = next_logits_row++;
    }
    if (row.n_logprobs >= 0) {
      logprobs_.resize(vocab);
      log_softmax(l, logprobs_);  // the model's own distribution, before any processing
    }
    if (row.mask_row >= 0) {
      if (static_cast<size_t>(row.mask_row) >= n_mask_rows) throw Error("sampling: mask row out of range");
      const uint32_t* mask = sampling.allowed_mask.data() + static_cast<size_t>(row.mask_row) * sampling.mask_words();
      for (size_t id = 0; id < vocab; ++id) {
        if (((mask[id / 32] >> (id % 32)) & 1u) == 0) l[id] = -INFINITY;
      }
    }
    Sampler& sampler = sampler_for(sampling, row);
    const std::span<const int32_t> prompt = history_range(sampling, row.prompt_begin, row.prompt_len);
    const std::span<const int32_t> output = history_range(sampling, row.output_begin, row.output_len);
    int32_t token = -1;
    if (row.want_probs) {  // a draft model's row: x ~ q, and q itself
      std::span<float> q(out.probs.data() + static_cast<size_t>(next_probs_row) * vocab, vocab);
      out.probs_row[r] = next_probs_row++;
      token = sampler.sample_with_distribution(l, prompt, output, q);
    } else if (row.draft_probs_row >= 0 && !sampler.is_greedy()) {  // verify a sampled draft
      if (static_cast<size_t>(row.draft_probs_row) >= n_draft_rows) throw Error("sampling: draft probability row out of range");
      target_probs_.resize(vocab);
      sampler.distribution(l, prompt, output, target_probs_);
      const std::span<const float> q(sampling.draft_probs.data() + static_cast<size_t>(row.draft_probs_row) * vocab, vocab);
      token = rejection_sample(target_probs_, q, row.draft_token, sampler.next_uniform()).token;
    } else {
      token = sampler.sample(l, prompt, output);
    }
    Entry& entry = samplers_[row.seq_id];
    if (!sampler.is_greedy()) ++entry.draws;
    out.sampled[r] = token;
    if (row.n_logprobs >= 0) {
      out.sampled_logprob[r] = logprobs_[token];
      out.top_begin[r] = static_cast<int32_t>(out.top.size());
      const int32_t k = std::min<int32_t>(row.n_logprobs, static_cast<int32_t>(vocab));
      // The k most likely tokens, best first (ties: lower id first), by a bounded min-heap.
      auto worse = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
        return a.second > b.second || (a.second == b.second && a.first < b.first);
      };
      heap_.clear();
      for (int32_t id = 0; k > 0 && id < static_cast<int32_t>(vocab); ++id) {
        const std::pair<int32_t, float> candidate{id, logprobs_[id]};
        if (static_cast<int32_t>(heap_.size()) < k) {
          heap_.push_back(candidate);
          std::push_heap(heap_.begin(), heap_.end(), worse);
        } else if (worse(candidate, heap_.front())) {
          std::pop_heap(heap_.begin(), heap_.end(), worse);
          heap_.back() = candidate;
          std::push_heap(heap_.begin(), heap_.end(), worse);
        }
      }
      std::sort_heap(heap_.begin(), heap_.end(), worse);
      for (const auto& [id, lp] : heap_) out.top.push_back({id, lp});
      out.top_len[r] = static_cast<int32_t>(heap_.size());
    }
  }
  // Forget sequences that were not sampled this step (finished, or waiting: rebuilt from the seed
  // when they return), so memory stays bounded by the rows of one step.
  std::erase_if(samplers_, [](const auto& kv) { return !kv.second.used; });
}

}  // namespace qs
