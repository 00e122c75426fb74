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

uint64_t draft_seed(uint64_t seed) {
  uint64_t z = seed ^ 0x5350454344524654ull;  // "SPECDRFT"
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void DraftModelProposer::drop(Work& w) {
  w.request->out->clear();
  if (w.request->probs != nullptr) w.request->probs->clear();
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
    if (r.probs != nullptr) r.probs->clear();
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
    if (r.sampling != nullptr) {
      w.sampling.params = r.sampling->params;
      w.sampling.params.seed = draft_seed(r.sampling->seed);
      w.sampling.seed = *w.sampling.params.seed;
      const SamplingParams& p = r.sampling->params;
      w.sampled = r.probs != nullptr && p.temperature != 0.0f && p.top_k != 1;
    }
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
      in.n_prompt = w.request->n_prompt >= 0 ? w.request->n_prompt : static_cast<int64_t>(w.request->tokens.size());
      in.first = w.n_computed;
      in.n = take;
      in.block_table = w.seq->block_table;
      in.n_logits = take == pending ? 1 : 0;
      if (w.request->sampling != nullptr) {
        w.sampling.draws = static_cast<uint64_t>(w.tokens.size());  // the drafted token's position
        in.sampling = &w.sampling;
      }
      in.want_probs = w.sampled;
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
      const auto row = static_cast<size_t>(w.row);
      const int32_t draft = out.sampled[row];
      w.row = -1;
      w.request->out->push_back(draft);
      if (w.sampled) {
        if (row < out.probs_row.size() && out.probs_row[row] >= 0) {
          const auto vocab = static_cast<size_t>(backend_.vocab_rows());
          const float* q = out.probs.data() + static_cast<size_t>(out.probs_row[row]) * vocab;
          w.request->probs->insert(w.request->probs->end(), q, q + vocab);
        } else {  // the backend returns no distributions: verify the drafts as point masses
          w.sampled = false;
          w.request->probs->clear();
        }
      }
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
