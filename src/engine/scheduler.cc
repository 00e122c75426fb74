#include "engine/scheduler.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace qs {
namespace {

int64_t blocks_for(int64_t n_tokens) { return (n_tokens + kKvBlockSize - 1) / kKvBlockSize; }

}  // namespace

int64_t SchedulerStep::n_tokens() const {
  int64_t n = 0;
  for (const auto& c : chunks) n += c.n;
  return n;
}

Scheduler::Scheduler(BlockManager& blocks, SchedulerOptions options) : blocks_(blocks), options_(options) {
  if (options_.max_num_seqs < 1 || options_.max_batched_tokens < 1) {
    throw Error("Scheduler: max_num_seqs and max_batched_tokens must be at least 1");
  }
}

void Scheduler::add(SchedSequence* seq) {
  // Preempted sequences sit at the front whatever their class; a newcomer never passes them.
  auto it = waiting_.end();
  while (it != waiting_.begin() && (*(it - 1))->priority > seq->priority && (*(it - 1))->n_preemptions == 0) --it;
  waiting_.insert(it, seq);
}

void Scheduler::remove(SchedSequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
  } else if (auto w = std::find(waiting_.begin(), waiting_.end(), seq); w != waiting_.end()) {
    waiting_.erase(w);
  }
  release_blocks(*seq);
}

void Scheduler::release_blocks(SchedSequence& seq) {
  // Back to front: the tail of a sequence is the least likely to be shared, so it is evicted first.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) blocks_.release(*it);
  seq.block_table.clear();
  seq.block_keys.clear();
  seq.draft_tokens.clear();
  seq.n_computed = 0;
}

bool Scheduler::grow_blocks(SchedSequence& seq, int64_t n_tokens) {
  const int64_t needed = blocks_for(n_tokens);
  const auto have = static_cast<int64_t>(seq.block_table.size());
  if (needed - have > blocks_.n_allocatable()) return false;
  for (int64_t i = have; i < needed; ++i) seq.block_table.push_back(blocks_.allocate());
  return true;
}

void Scheduler::preempt(SchedSequence* seq, SchedulerStep& step) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  release_blocks(*seq);  // full blocks stay in the prefix cache: the recompute may reuse them
  ++seq->n_preemptions;
  waiting_.push_front(seq);
  step.preempted.push_back(seq);
}

bool Scheduler::try_admit(SchedSequence& seq) {
  const auto n_tokens = static_cast<int64_t>(seq.tokens.size());
  // At least one token is computed so the step yields the logits of the last one.
  const PrefixMatch match = blocks_.match_prefix(seq.tokens, (n_tokens - 1) / kKvBlockSize);
  const int64_t n_new = blocks_for(n_tokens) - static_cast<int64_t>(match.blocks.size());
  if (n_new + blocks_.count_unreferenced(match.blocks) > blocks_.n_allocatable()) return false;
  for (int32_t b : match.blocks) blocks_.acquire(b);  // before allocating: never evict our own hit
  seq.block_table = match.blocks;
  seq.block_keys = match.keys;
  seq.n_computed = match.n_tokens();
  for (int64_t i = 0; i < n_new; ++i) seq.block_table.push_back(blocks_.allocate());
  if (!seq.admitted_once) {
    seq.n_cached_prompt_tokens = std::min(match.n_tokens(), seq.n_prompt);
    seq.admitted_once = true;
  }
  return true;
}

SchedulerStep Scheduler::schedule() {
  SchedulerStep step;
  int64_t budget = options_.max_batched_tokens;
  // 1. Decode, oldest first; growth that finds no block preempts the newest running sequence.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    SchedSequence* seq = running_[i];
    if (seq->n_remaining() != 1) continue;
    bool ok = grow_blocks(*seq, static_cast<int64_t>(seq->tokens.size()));
    while (!ok) {
      SchedSequence* victim = running_.back();
      preempt(victim, step);
      if (victim == seq) break;
      ok = grow_blocks(*seq, static_cast<int64_t>(seq->tokens.size()));
    }
    if (!ok) break;  // `seq` was the newest and preempted itself
    // Drafts ride along when the budget and free blocks allow; they never preempt.
    auto n_draft = std::min<int64_t>(static_cast<int64_t>(seq->draft_tokens.size()), budget - 1);
    while (n_draft > 0 && !grow_blocks(*seq, static_cast<int64_t>(seq->tokens.size()) + n_draft)) --n_draft;
    seq->draft_tokens.resize(static_cast<size_t>(n_draft));
    step.chunks.push_back({seq, seq->n_computed, 1 + n_draft, true, n_draft});
    budget -= 1 + n_draft;
  }
  // Prefill next to decodes is capped (set_prefill_limit_with_decode) so streams keep their ITL.
  int64_t prefill_budget = budget;
  if (!step.chunks.empty()) prefill_budget = std::min(budget, prefill_limit_with_decode_);
  // 2. Prefill chunks of running sequences (their blocks were taken at admission).
  for (SchedSequence* seq : running_) {
    if (prefill_budget == 0) break;
    if (seq->n_remaining() <= 1) continue;
    const int64_t n = std::min(prefill_budget, seq->n_remaining());
    step.chunks.push_back({seq, seq->n_computed, n, n == seq->n_remaining()});
    prefill_budget -= n;
  }
  // 3. Admission, FIFO. Not in a step that preempted: the freed blocks are the preemptor's.
  while (step.preempted.empty() && prefill_budget > 0 && !waiting_.empty() &&
         static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    SchedSequence* seq = waiting_.front();
    if (!try_admit(*seq)) break;
    waiting_.pop_front();
    running_.push_back(seq);
    step.admitted.push_back(seq);
    const int64_t n = std::min(prefill_budget, seq->n_remaining());
    step.chunks.push_back({seq, seq->n_computed, n, n == seq->n_remaining()});
    prefill_budget -= n;
  }
  return step;
}

void Scheduler::commit(const SchedulerStep& step) {
  for (const ScheduledChunk& c : step.chunks) {
    SchedSequence& seq = *c.seq;
    seq.n_computed = c.first + c.n - c.n_draft;
    if (c.first < seq.n_prompt) seq.n_prefill_computed += std::min(c.first + c.n, seq.n_prompt) - c.first;
    index_full_blocks(seq);
  }
}

void Scheduler::accept_drafts(SchedSequence& seq, int64_t n_accepted) {
  // The accepted drafts and the token sampled after them are in seq.tokens: n_computed + 1 +
  // n_accepted tokens, of which all but the last have their KV in the cache.
  if (n_accepted < 0 || seq.n_computed + n_accepted >= static_cast<int64_t>(seq.tokens.size())) {
    throw Error("Scheduler::accept_drafts: " + std::to_string(n_accepted) + " accepted drafts for a sequence of " +
                std::to_string(seq.tokens.size()) + " tokens with " + std::to_string(seq.n_computed) + " computed");
  }
  seq.n_computed += n_accepted;
  seq.draft_tokens.clear();
  index_full_blocks(seq);
}

void Scheduler::index_full_blocks(SchedSequence& seq) {
  const int64_t n_full = seq.n_computed / kKvBlockSize;
  while (static_cast<int64_t>(seq.block_keys.size()) < n_full) {
    const size_t b = seq.block_keys.size();
    const uint64_t parent = b == 0 ? kRootBlockKey : seq.block_keys[b - 1];
    const std::span<const int32_t> block_tokens(seq.tokens.data() + b * kKvBlockSize, kKvBlockSize);
    seq.block_keys.push_back(blocks_.commit_full_block(seq.block_table[b], parent, block_tokens));
  }
}

}  // namespace qs
