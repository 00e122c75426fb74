// The scheduler: which sequences run this step, which tokens of each, and whose KV blocks go.
//
// Bookkeeping only (token counts and block ids), unit-testable without a model. One step:
//   1. decode: every running sequence with one token left to compute (oldest first) gets it,
//      followed by its draft tokens (speculative decoding: SchedSequence::draft_tokens, trimmed
//      to the token budget and to the free blocks; drafts never preempt anyone);
//      when its block table must grow and no block is left, the newest running sequence is
//      preempted (vLLM's recompute preemption: its blocks are released, it returns to the front
//      of the waiting queue, and on readmission prompt + generated tokens are prefilled again);
//   2. prefill: running sequences still prefilling get chunks from what is left of the
//      `max_batched_tokens` budget (chunked prefill, Sarathi-Serve / vLLM);
//   3. admission: waiting sequences (priority order, FIFO within a priority) join while a sequence slot, token budget and blocks
//      for all their tokens are there; their longest cached prefix (full blocks) is reused and
//      at least one token is always computed so the step yields logits.
// Blocks are allocated lazily: a sequence holds blocks for the tokens it has, never for
// max_tokens in advance. After the forward, commit() advances the sequences and indexes newly
// full blocks in the prefix cache; a decode chunk's drafts count only once the engine accepted
// them (accept_drafts()), so a block is never published with unaccepted tokens, and the KV rows
// of rejected drafts lie past n_computed, to be overwritten by later steps.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "kv/block_manager.h"

namespace qs {

/// KV bookkeeping of one sequence (the engine's EngineSequence derives from it).
struct SchedSequence {
  virtual ~SchedSequence() = default;
  std::vector<int32_t> tokens;          // prompt + generated so far
  int64_t n_prompt = 0;                 // leading tokens that are the prompt
  int64_t n_computed = 0;               // tokens whose KV is in the cache
  std::vector<int32_t> block_table;     // KV blocks in position order
  std::vector<uint64_t> block_keys;     // prefix-cache keys of the full computed blocks
  // Counters for usage and metrics.
  int64_t n_cached_prompt_tokens = -1;  // prompt tokens reused at first admission (-1: not yet)
  int64_t n_prefill_computed = 0;       // prompt tokens actually computed (recomputes included)
  int64_t n_preemptions = 0;
  bool admitted_once = false;
  int32_t priority = 0;                 // queue order: lower is sooner, ties FIFO (vLLM's priority)
  // Speculative decoding: tokens proposed to follow `tokens` (set by the engine before
  // schedule(), which trims them to what the step can carry; not part of `tokens` until accepted).
  std::vector<int32_t> draft_tokens;

  int64_t n_remaining() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

struct SchedulerOptions {
  int32_t max_num_seqs = 16;         // running sequences at most
  int64_t max_batched_tokens = 512;  // tokens per step (decode + prefill chunks)
};

/// Tokens [first, first + n) of `seq` are computed this step; logits when the chunk reaches the
/// end of the sequence's tokens. A decode chunk with n_draft > 0 covers the last token and the
/// first n_draft of seq->draft_tokens (n = 1 + n_draft, positions first .. first + n_draft) and
/// wants n logits rows.
struct ScheduledChunk {
  SchedSequence* seq = nullptr;
  int64_t first = 0;
  int64_t n = 0;
  bool needs_logits = false;
  int64_t n_draft = 0;
};

struct SchedulerStep {
  std::vector<ScheduledChunk> chunks;        // decode chunks first, then prefill chunks
  std::vector<SchedSequence*> admitted;      // newly admitted (or readmitted) this step
  std::vector<SchedSequence*> preempted;     // sent back to the waiting queue this step
  int64_t n_tokens() const;
};

class Scheduler {
 public:
  /// `blocks` must outlive the scheduler.
  Scheduler(BlockManager& blocks, SchedulerOptions options);

  /// Queues a new sequence behind every waiting sequence of its priority or a lower (sooner) one
  /// and ahead of the later classes: priority order, FIFO within a class.
  void add(SchedSequence* seq);
  /// Removes a finished / cancelled / failed sequence from whichever queue holds it and releases
  /// its blocks. A sequence not held is ignored.
  void remove(SchedSequence* seq);
  /// Plans one step (see the file comment). Preemption and admission happen here.
  SchedulerStep schedule();
  /// Marks the step's chunks computed (a decode chunk's drafts excluded) and indexes the newly
  /// full blocks in the prefix cache.
  void commit(const SchedulerStep& step);
  /// After commit(): `n_accepted` drafts of `seq`'s decode chunk were accepted and appended to
  /// seq.tokens (with the token sampled after them), so their KV counts as computed; indexes the
  /// blocks that became full. Throws qs::Error when n_accepted exceeds the tokens appended.
  void accept_drafts(SchedSequence& seq, int64_t n_accepted);

  const std::deque<SchedSequence*>& waiting() const { return waiting_; }
  const std::vector<SchedSequence*>& running() const { return running_; }
  const SchedulerOptions& options() const { return options_; }
  /// Caps the prefill tokens of a step that also runs decode tokens (>= 1; default: no cap
  /// beyond max_batched_tokens). See engine/prefill_budget.h.
  void set_prefill_limit_with_decode(int64_t tokens) { prefill_limit_with_decode_ = tokens < 1 ? 1 : tokens; }

 private:
  bool grow_blocks(SchedSequence& seq, int64_t n_tokens);
  void preempt(SchedSequence* seq, SchedulerStep& step);
  bool try_admit(SchedSequence& seq);
  void release_blocks(SchedSequence& seq);
  void index_full_blocks(SchedSequence& seq);

  BlockManager& blocks_;
  SchedulerOptions options_;
  int64_t prefill_limit_with_decode_ = INT64_MAX;
  std::deque<SchedSequence*> waiting_;
  std::vector<SchedSequence*> running_;  // admission order: the back is the newest
};

}  // namespace qs
