#include "engine/draft_model_proposer.h"

#include <algorithm>

#include "core/error.h"
#include "kv/kv_types.h"

namespace qs {

DraftModelProposer::DraftModelProposer(Backend& backend)
    : backend_(backend), blocks_(backend.kv_blocks(), false), runner_(backend) {}

DraftModelProposer::~DraftModelProposer() = default;

int64_t DraftModelProposer::cached_tokens(uint64_t seq_id) const {
  const auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? 0 : static_cast<int64_t>(it->second.computed.size());
}

void DraftModelProposer::release(uint64_t seq_id) {
  const auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return;
  for (const int32_t block : it->second.block_table) blocks_.release(block);
  sequences_.erase(it);
}

bool DraftModelProposer::reserve(DraftSequence& seq, int64_t n_tokens) {
  const int64_t need = (n_tokens + kKvBlockSize - 1) / kKvBlockSize;
  const int64_t extra = need - static_cast<int64_t>(seq.block_table.size());
  if (extra > blocks_.n_allocatable()) return false;
  for (int64_t i = 0; i < extra; ++i) seq.block_table.push_back(blocks_.allocate());
  return true;
}

void DraftModelProposer::drop(Work& w) {
  w.request->out->clear();
  w.active = false;
  for (const int32_t block : w.seq->block_table) blocks_.release(block);
  w.seq->block_table.clear();
  w.seq->computed.clear();
}

void DraftModelProposer::propose(std::span<const DraftRequest> requests) {
  last_steps_ = 0;
  work_.clear();
  work_.reserve(requests.size());
  const int64_t context = backend_.limits().max_context_tokens;
  for (const DraftRequest& r : requests) {
    r.out->clear();
    const auto n = static_cast<int64_t>(r.tokens.size());
    // Positions the draft computes: the n tokens and drafts 0..k-2 (the k-th is not computed).
    if (r.k < 1 || n < 1 || n + r.k - 1 > context) continue;
    DraftSequence& seq = sequences_[r.seq_id];  // references stay valid across rehashing
    const auto common = std::mismatch(seq.computed.begin(), seq.computed.end(), r.tokens.begin(), r.tokens.end());
    const int64_t keep = std::min<int64_t>(common.first - seq.computed.begin(), n - 1);
    seq.computed.resize(static_cast<size_t>(keep));  // roll back rejected drafts
    Work w;
    w.request = &r;
    w.seq = &seq;
    w.tokens.assign(r.tokens.begin(), r.tokens.end());
    w.n_computed = keep;
    work_.push_back(std::move(w));
  }
  const int64_t max_tokens = backend_.limits().max_batch_tokens;
  const int32_t max_seqs = backend_.limits().max_seqs;
  for (;;) {
    runner_.clear();
    int64_t budget = max_tokens;
    int32_t n_seqs = 0;
    for (Work& w : work_) {
      if (!w.active || budget == 0 || n_seqs == max_seqs) continue;
      const auto pending = static_cast<int64_t>(w.tokens.size()) - w.n_computed;
      const int64_t take = std::min(pending, budget);
      if (!reserve(*w.seq, w.n_computed + take)) {
        drop(w);
        continue;
      }
      StepSequence in;
      in.seq_id = w.request->seq_id;
      in.tokens = w.tokens;
      in.n_prompt = static_cast<int64_t>(w.request->tokens.size());
      in.first = w.n_computed;
      in.n = take;
      in.block_table = w.seq->block_table;
      in.n_logits = take == pending ? 1 : 0;  // greedy: sampling stays null
      const int32_t row = runner_.add(in);
      w.row = in.n_logits > 0 ? row : -1;
      w.n_added = take;
      budget -= take;
      ++n_seqs;
    }
    if (n_seqs == 0) break;
    const StepOutput& out = runner_.run();
    ++last_steps_;
    for (Work& w : work_) {
      if (w.n_added == 0) continue;
      w.seq->computed.insert(w.seq->computed.end(), w.tokens.begin() + w.n_computed,
                             w.tokens.begin() + w.n_computed + w.n_added);
      w.n_computed += w.n_added;
      w.n_added = 0;
      if (w.row < 0) continue;
      const int32_t draft = out.sampled[static_cast<size_t>(w.row)];
      w.row = -1;
      w.request->out->push_back(draft);
      if (static_cast<int32_t>(w.request->out->size()) == w.request->k) {
        w.active = false;
      } else {
        w.tokens.push_back(draft);
      }
    }
  }
}

std::unique_ptr<DraftProposer> make_draft_proposer(const SpecDecodeOptions& spec, const Backend& target, Backend* draft) {
  if (!spec.enabled()) return nullptr;
  if (!spec.draft_model) return std::make_unique<NgramProposer>(spec.ngram_max, spec.ngram_min);
  if (draft == nullptr) throw Error("speculative decoding with a draft model needs the draft model's backend");
  if (draft->vocab_rows() != target.vocab_rows()) {
    throw Error("the draft model has " + std::to_string(draft->vocab_rows()) + " logits rows, the target " +
                std::to_string(target.vocab_rows()));
  }
  return std::make_unique<DraftModelProposer>(*draft);
}


}  // namespace qs
