// One engine step: build the batch, run the forward pass, sample and emit (see engine.h).
#include <algorithm>
#include <span>

#include "engine/engine.h"
#include "engine/sequence.h"
#include "sampling/logits_processing.h"

namespace qs {
namespace {

// The `k` most likely tokens of a log-probability row, best first (ties: lower id first).
std::vector<std::pair<int32_t, float>> top_tokens(const std::vector<float>& logprobs, int32_t k) {
  std::vector<std::pair<int32_t, float>> top;
  if (k <= 0) return top;
  auto worse = [](const std::pair<int32_t, float>& a, const std::pair<int32_t, float>& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  };
  for (int32_t id = 0; id < static_cast<int32_t>(logprobs.size()); ++id) {
    const std::pair<int32_t, float> candidate{id, logprobs[id]};
    if (static_cast<int32_t>(top.size()) < k) {
      top.push_back(candidate);
      std::push_heap(top.begin(), top.end(), worse);
    } else if (worse(candidate, top.front())) {
      std::pop_heap(top.begin(), top.end(), worse);
      top.back() = candidate;
      std::push_heap(top.begin(), top.end(), worse);
    }
  }
  std::sort_heap(top.begin(), top.end(), worse);
  return top;
}

}  // namespace

void Engine::emit_token(EngineSequence& seq, const float* logits_row) {
  const auto vocab = static_cast<size_t>(runner_.config().vocab_size);
  std::span<float> logits(const_cast<float*>(logits_row), vocab);
  EngineEvent event;
  if (seq.request.top_logprobs >= 0) {
    log_softmax(logits, logprobs_);  // the model's own distribution, before any processing
  }
  const int32_t token = seq.sampler.sample(logits, seq.request.prompt_ids, seq.output_ids);
  seq.output_ids.push_back(token);
  event.token_ids.push_back(token);
  if (seq.request.top_logprobs >= 0) {
    event.logprobs.push_back({token, logprobs_[token], top_tokens(logprobs_, seq.request.top_logprobs)});
  }
  event.prompt_tokens = seq.prompt_tokens();
  event.completion_tokens = static_cast<int64_t>(seq.output_ids.size());
  const auto& stops = seq.request.stop_token_ids;
  const bool is_stop_token = std::find(stops.begin(), stops.end(), token) != stops.end();
  StopMatcher::Result text;
  // Ids past the tokenizer's vocabulary (the embedding's padding rows, e.g. 151669..151935 in
  // Qwen3) have no text.
  const bool has_text = !is_stop_token && token < tokenizer_.vocab_size();
  if (has_text) text = seq.stop.push(seq.decoder.feed(token));
  event.text = std::move(text.text);
  seq.stream->push(std::move(event));
  if (is_stop_token || text.stopped) {
    finish(seq, "stop");
  } else if (static_cast<int32_t>(seq.output_ids.size()) >= seq.request.max_tokens) {
    finish(seq, "length");
  }
}

bool Engine::step() {
  for (auto& seq : running_) {
    if (seq->stream->cancelled()) finish(*seq, "cancelled");
  }
  Batch batch;
  std::vector<EngineSequence*> logits_owners;
  int64_t budget = options_.max_batched_tokens;
  // Decode tokens first: every running stream advances each step (bounded ITL).
  for (auto& seq : running_) {
    if (seq->finished || !seq->prefill_done() || budget == 0) continue;
    const auto index = static_cast<int32_t>(batch.sequences.size());
    batch.sequences.push_back({&seq->blocks.blocks()});
    const int32_t position = static_cast<int32_t>(seq->prompt_tokens() + seq->output_ids.size() - 1);
    batch.add_tokens(index, &seq->output_ids.back(), 1, position, true);
    logits_owners.push_back(seq.get());
    --budget;
  }
  // Then prefill chunks with what is left of the token budget (chunked prefill).
  for (auto& seq : running_) {
    if (seq->finished || seq->prefill_done() || budget == 0) continue;
    const int64_t n = std::min(budget, seq->prompt_tokens() - seq->n_prefilled);
    const bool completes = seq->n_prefilled + n == seq->prompt_tokens();
    const auto index = static_cast<int32_t>(batch.sequences.size());
    batch.sequences.push_back({&seq->blocks.blocks()});
    batch.add_tokens(index, seq->request.prompt_ids.data() + seq->n_prefilled, n,
                     static_cast<int32_t>(seq->n_prefilled), completes);
    if (completes) logits_owners.push_back(seq.get());
    seq->n_prefilled += n;
    budget -= n;
  }
  if (batch.n_tokens() == 0) return false;
  runner_.forward(batch, logits_.data());
  const auto vocab = static_cast<size_t>(runner_.config().vocab_size);
  for (size_t j = 0; j < logits_owners.size(); ++j) {
    emit_token(*logits_owners[j], logits_.data() + j * vocab);
  }
  return true;
}

}  // namespace qs
