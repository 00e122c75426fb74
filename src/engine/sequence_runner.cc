#include "engine/sequence_runner.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"

namespace qs {

SequenceRunner::SequenceRunner(Backend& backend)
    : backend_(backend), blocks_(backend.kv_blocks(), false), runner_(backend) {}

SequenceRunner::~SequenceRunner() { reset(); }

void SequenceRunner::reset() {
  for (int32_t block : block_table_) blocks_.release(block);
  block_table_.clear();
  tokens_.clear();
  n_prompt_ = 0;
}

void SequenceRunner::grow(int64_t n_tokens) {
  const int64_t context = backend_.limits().max_context_tokens;
  if (n_tokens > context) {
    throw Error("sequence of " + std::to_string(n_tokens) + " tokens exceeds the context of " +
                std::to_string(context) + " tokens");
  }
  const int64_t need = (n_tokens + kKvBlockSize - 1) / kKvBlockSize;
  if (need - static_cast<int64_t>(block_table_.size()) > blocks_.n_allocatable()) {
    throw Error("KV cache too small: " + std::to_string(n_tokens) + " tokens need " + std::to_string(need) +
                " blocks, " + std::to_string(blocks_.n_allocatable() + static_cast<int64_t>(block_table_.size())) +
                " available");
  }
  while (static_cast<int64_t>(block_table_.size()) < need) block_table_.push_back(blocks_.allocate());
}

int32_t SequenceRunner::append(std::span<const int32_t> tokens, SequenceSampling* sampling, bool all_logits,
                               std::vector<float>* logits_out) {
  if (tokens.empty()) throw Error("nothing to compute: no tokens");
  const int64_t first = n_tokens();
  const auto n = static_cast<int64_t>(tokens.size());
  grow(first + n);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  if (first == 0) n_prompt_ = n;  // the first append is the prompt (penalties tell it apart)
  const auto vocab = static_cast<size_t>(backend_.vocab_rows());
  if (all_logits && logits_out != nullptr) logits_out->resize(static_cast<size_t>(n) * vocab);
  const int64_t chunk = backend_.limits().max_batch_tokens;
  int32_t sampled = -1;
  for (int64_t begin = first; begin < first + n; begin += chunk) {
    const int64_t len = std::min(chunk, first + n - begin);
    const bool last = begin + len == first + n;
    StepSequence in;
    in.seq_id = 1;
    in.tokens = tokens_;
    in.n_prompt = n_prompt_;
    in.first = begin;
    in.n = len;
    in.block_table = block_table_;
    in.n_logits = all_logits ? static_cast<int32_t>(len) : (last ? 1 : 0);
    in.sampling = sampling;
    in.want_logits = all_logits;
    runner_.clear();
    runner_.add(in);
    const StepOutput& out = runner_.run();
    if (all_logits && logits_out != nullptr) {
      std::memcpy(logits_out->data() + static_cast<size_t>(begin - first) * vocab, out.logits.data(),
                  static_cast<size_t>(len) * vocab * sizeof(float));
    } else if (last) {
      sampled = out.sampled[0];
    }
  }
  return sampled;
}

std::span<const int32_t> SequenceRunner::verify(int32_t token, std::span<const int32_t> drafts,
                                                SequenceSampling* sampling, std::span<const float> draft_probs) {
  const int64_t first = n_tokens();
  const auto n = static_cast<int64_t>(drafts.size()) + 1;
  if (first == 0) throw Error("verify: the sequence has no prompt yet");
  if (n > backend_.limits().max_batch_tokens) {
    throw Error("verify: " + std::to_string(n) + " tokens exceed the batch of " +
                std::to_string(backend_.limits().max_batch_tokens) + " tokens");
  }
  grow(first + n);
  tokens_.push_back(token);
  tokens_.insert(tokens_.end(), drafts.begin(), drafts.end());
  StepSequence in;
  in.seq_id = 1;
  in.tokens = tokens_;
  in.n_prompt = n_prompt_;
  in.first = first;
  in.n = n;
  in.block_table = block_table_;
  in.n_logits = static_cast<int32_t>(n);
  in.sampling = sampling;
  in.draft_probs = draft_probs;
  runner_.clear();
  runner_.add(in);
  const StepOutput& out = runner_.run();
  sampled_.assign(out.sampled.begin(), out.sampled.end());
  return sampled_;
}

void SequenceRunner::truncate(int64_t n_tokens) {
  if (n_tokens > this->n_tokens() || n_tokens < n_prompt_) {
    throw Error("truncate: " + std::to_string(n_tokens) + " tokens asked, the sequence has " +
                std::to_string(this->n_tokens()) + " (prompt " + std::to_string(n_prompt_) + ")");
  }
  tokens_.resize(static_cast<size_t>(n_tokens));
}

}  // namespace qs
