// Scheduler bookkeeping without a model: decode first, chunked prefill, lazy block growth,
// preemption of the newest sequence, FIFO admission with prefix reuse.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "engine/scheduler.h"

namespace qs {
namespace {

SchedSequence make_seq(int64_t n_prompt, int32_t first_token = 0) {
  SchedSequence s;
  s.tokens.resize(static_cast<size_t>(n_prompt));
  std::iota(s.tokens.begin(), s.tokens.end(), first_token);
  s.n_prompt = n_prompt;
  return s;
}

// What the engine does after a step: commit, then append one sampled token per logits chunk.
void finish_step(Scheduler& sched, const SchedulerStep& step, int32_t token = 7) {
  sched.commit(step);
  for (const auto& c : step.chunks) {
    if (c.needs_logits) c.seq->tokens.push_back(token);
  }
}

TEST(Scheduler, ChunkedPrefillThenDecodeFirst) {
  BlockManager blocks(64, true);
  Scheduler sched(blocks, {4, 8});
  SchedSequence a = make_seq(20), b = make_seq(5, 1000);
  sched.add(&a);
  SchedulerStep s1 = sched.schedule();
  ASSERT_EQ(s1.chunks.size(), 1u);
  EXPECT_EQ(s1.chunks[0].n, 8);
  EXPECT_FALSE(s1.chunks[0].needs_logits);
  EXPECT_EQ(a.block_table.size(), 2u);  // blocks for the whole prompt at admission, none for max_tokens
  finish_step(sched, s1);
  sched.add(&b);
  SchedulerStep s2 = sched.schedule();  // a: 8 more; b: admitted, gets nothing (budget spent)
  ASSERT_EQ(s2.chunks.size(), 1u);
  EXPECT_EQ(s2.chunks[0].seq, &a);
  EXPECT_TRUE(s2.admitted.empty());
  finish_step(sched, s2);
  SchedulerStep s3 = sched.schedule();  // a: last 4 (logits), b admitted with 4 of its 5
  ASSERT_EQ(s3.chunks.size(), 2u);
  EXPECT_EQ(s3.chunks[0].n, 4);
  EXPECT_TRUE(s3.chunks[0].needs_logits);
  EXPECT_EQ(s3.chunks[1].seq, &b);
  EXPECT_EQ(s3.chunks[1].n, 4);
  finish_step(sched, s3);
  SchedulerStep s4 = sched.schedule();  // decode of a first, then b's last prompt token
  ASSERT_EQ(s4.chunks.size(), 2u);
  EXPECT_EQ(s4.chunks[0].seq, &a);
  EXPECT_EQ(s4.chunks[0].n, 1);
  EXPECT_EQ(s4.chunks[0].first, 20);
  EXPECT_EQ(s4.chunks[1].seq, &b);
  EXPECT_TRUE(s4.chunks[1].needs_logits);
  EXPECT_EQ(blocks.n_indexed(), 1);  // a's first 16 tokens form a full block
}

TEST(Scheduler, GrowsLazilyAndPreemptsTheNewestWhenBlocksRunOut) {
  BlockManager blocks(4, false);
  Scheduler sched(blocks, {4, 64});
  SchedSequence a = make_seq(16), b = make_seq(16, 100);
  sched.add(&a);
  sched.add(&b);
  SchedulerStep s1 = sched.schedule();  // both admitted: 1 block each
  EXPECT_EQ(s1.admitted.size(), 2u);
  finish_step(sched, s1);
  EXPECT_EQ(blocks.n_allocatable(), 2);
  // Each decode crosses into a new block: 2 more, then the pool is empty.
  SchedulerStep s2 = sched.schedule();
  EXPECT_EQ(s2.chunks.size(), 2u);
  EXPECT_EQ(blocks.n_allocatable(), 0);
  for (int i = 0; i < 16; ++i) finish_step(sched, i == 0 ? s2 : sched.schedule());
  // Both now hold 32 tokens in 2 blocks; a's next decode needs a third: b (newest) is preempted.
  SchedulerStep s3 = sched.schedule();
  ASSERT_EQ(s3.preempted.size(), 1u);
  EXPECT_EQ(s3.preempted[0], &b);
  EXPECT_EQ(b.n_computed, 0);
  EXPECT_TRUE(b.block_table.empty());
  EXPECT_EQ(b.n_preemptions, 1);
  ASSERT_EQ(sched.waiting().size(), 1u);
  EXPECT_EQ(sched.waiting().front(), &b);
  ASSERT_EQ(s3.chunks.size(), 1u);
  EXPECT_EQ(s3.chunks[0].seq, &a);
  EXPECT_TRUE(s3.admitted.empty());  // no readmission in a step that preempted
  finish_step(sched, s3);
  // When a finishes, b comes back and recomputes prompt + generated tokens.
  sched.remove(&a);
  EXPECT_EQ(blocks.n_allocatable(), 4);
  SchedulerStep s4 = sched.schedule();
  ASSERT_EQ(s4.admitted.size(), 1u);
  EXPECT_EQ(s4.chunks[0].first, 0);
  EXPECT_EQ(s4.chunks[0].n, static_cast<int64_t>(b.tokens.size()));
  EXPECT_TRUE(s4.chunks[0].needs_logits);
}

TEST(Scheduler, NewestPreemptsItselfWhenItIsTheOneGrowing) {
  BlockManager blocks(2, false);
  Scheduler sched(blocks, {4, 64});
  SchedSequence a = make_seq(5);
  sched.add(&a);
  finish_step(sched, sched.schedule());
  SchedSequence b = make_seq(16, 50);
  sched.add(&b);
  finish_step(sched, sched.schedule());  // a decodes, b is admitted into the last block
  // b's decode needs a second block and b is the newest: it preempts itself; a keeps running.
  SchedulerStep s = sched.schedule();
  ASSERT_EQ(s.preempted.size(), 1u);
  EXPECT_EQ(s.preempted[0], &b);
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq, &a);
  EXPECT_EQ(sched.running().size(), 1u);
  EXPECT_EQ(blocks.n_allocatable(), 1);
}

TEST(Scheduler, AdmissionReusesCachedPrefixButComputesAtLeastOneToken) {
  BlockManager blocks(16, true);
  Scheduler sched(blocks, {4, 64});
  SchedSequence a = make_seq(32);
  sched.add(&a);
  finish_step(sched, sched.schedule());
  sched.remove(&a);  // both full blocks stay cached
  EXPECT_EQ(blocks.n_cached_unreferenced(), 2);
  SchedSequence same = make_seq(32);  // identical prompt: 1 block reused, 16 tokens computed
  sched.add(&same);
  SchedulerStep s = sched.schedule();
  EXPECT_EQ(same.n_cached_prompt_tokens, 16);
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].first, 16);
  EXPECT_EQ(s.chunks[0].n, 16);
  SchedSequence longer = make_seq(40);  // shares both blocks with a
  sched.add(&longer);
  SchedulerStep s2 = sched.schedule();
  EXPECT_EQ(longer.n_cached_prompt_tokens, 32);
  EXPECT_EQ(longer.block_table[0], same.block_table[0]);  // shared block
  finish_step(sched, s2);
  EXPECT_EQ(longer.n_prefill_computed, 8);
  sched.remove(&same);
  sched.remove(&longer);
  EXPECT_EQ(blocks.n_referenced(), 0);
}

TEST(Scheduler, FifoAdmissionWaitsForBlocks) {
  BlockManager blocks(3, false);
  Scheduler sched(blocks, {4, 64});
  SchedSequence big = make_seq(40), small = make_seq(4, 90), next = make_seq(4, 95);
  sched.add(&big);
  sched.add(&small);
  sched.add(&next);
  SchedulerStep s = sched.schedule();
  EXPECT_EQ(s.admitted.size(), 1u);  // big takes all 3 blocks; small waits (FIFO)
  EXPECT_EQ(sched.waiting().size(), 2u);
  sched.remove(&big);
  SchedulerStep s2 = sched.schedule();
  EXPECT_EQ(s2.admitted.size(), 2u);
}

// vLLM's priority: lower is sooner, ties FIFO; a preempted sequence keeps its place at the front.
TEST(Scheduler, PriorityOrdersTheQueueTiesFifo) {
  BlockManager blocks(64, false);
  Scheduler sched(blocks, {1, 64});
  SchedSequence a = make_seq(4, 10), b = make_seq(4, 20), c = make_seq(4, 30), d = make_seq(4, 40), e = make_seq(4, 50);
  a.priority = 0;
  b.priority = 5;
  c.priority = -1;
  d.priority = 0;
  e.priority = 5;
  for (SchedSequence* s : {&a, &b, &c, &d, &e}) sched.add(s);
  const std::vector<SchedSequence*> expected = {&c, &a, &d, &b, &e};
  EXPECT_EQ(std::vector<SchedSequence*>(sched.waiting().begin(), sched.waiting().end()), expected);
  // One slot: admission follows the order, one sequence at a time.
  for (SchedSequence* want : expected) {
    SchedulerStep step = sched.schedule();
    ASSERT_EQ(step.admitted.size(), 1u);
    EXPECT_EQ(step.admitted.front(), want);
    sched.remove(want);
  }
}

TEST(Scheduler, NewcomerOfASoonerClassDoesNotPassAPreemptedSequence) {
  BlockManager blocks(64, false);
  Scheduler sched(blocks, {4, 64});
  SchedSequence preempted = make_seq(4, 10), urgent = make_seq(4, 20);
  preempted.priority = 3;
  preempted.n_preemptions = 1;  // as after preempt(): at the front of the queue
  urgent.priority = 0;
  sched.add(&preempted);
  sched.add(&urgent);
  EXPECT_EQ(sched.waiting().front(), &preempted);
  EXPECT_EQ(sched.waiting().back(), &urgent);
}

// Speculative decoding: a decode chunk carries the drafts the budget and free blocks allow; only
// accepted drafts count as computed and reach the prefix cache.
TEST(Scheduler, DraftsRideWithTheDecodeTokenWithinTheBudget) {
  BlockManager blocks(64, true);
  Scheduler sched(blocks, {4, 16});
  SchedSequence a = make_seq(15);
  sched.add(&a);
  finish_step(sched, sched.schedule());  // prefill 15 (logits) -> 16 tokens, 15 computed
  a.draft_tokens = {1, 2, 3, 4, 5};
  const SchedulerStep s = sched.schedule();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].first, 15);
  EXPECT_EQ(s.chunks[0].n, 6);  // the last token + 5 drafts
  EXPECT_EQ(s.chunks[0].n_draft, 5);
  EXPECT_EQ(a.block_table.size(), 2u);  // positions up to 20
  sched.commit(s);
  EXPECT_EQ(a.n_computed, 16);  // the drafts are not computed until accepted
  EXPECT_EQ(blocks.n_indexed(), 1);
  for (int32_t t : {1, 2, 42}) a.tokens.push_back(t);  // 2 drafts accepted, then a correction
  sched.accept_drafts(a, 2);
  EXPECT_EQ(a.n_computed, 18);
  EXPECT_EQ(a.n_remaining(), 1);
  EXPECT_TRUE(a.draft_tokens.empty());
  EXPECT_THROW(sched.accept_drafts(a, 1), Error);  // nothing more was appended
}

TEST(Scheduler, DraftsAreTrimmedToTheTokenBudgetAndTheFreeBlocks) {
  BlockManager blocks(1, true);  // one block: 16 positions
  Scheduler sched(blocks, {4, 6});
  SchedSequence a = make_seq(6);
  sched.add(&a);
  finish_step(sched, sched.schedule());  // 7 tokens, 6 computed
  a.draft_tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  SchedulerStep s = sched.schedule();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].n_draft, 5);  // budget 6 = 1 + 5
  EXPECT_EQ(a.draft_tokens.size(), 5u);
  sched.commit(s);
  a.tokens.push_back(9);  // every draft rejected
  sched.accept_drafts(a, 0);
  a.draft_tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  // 8 tokens now: the one block holds positions up to 15, room for 8 drafts; the budget allows 5.
  s = sched.schedule();
  EXPECT_EQ(s.chunks[0].n_draft, 5);
  EXPECT_TRUE(s.preempted.empty());
  sched.commit(s);
  for (int32_t t : {1, 2, 3, 4, 5, 10}) a.tokens.push_back(t);  // all 5 accepted, then 10
  sched.accept_drafts(a, 5);
  EXPECT_EQ(a.n_computed, 13);
  a.draft_tokens = {1, 2, 3, 4, 5};
  s = sched.schedule();  // 14 tokens: positions 13..15 fit the block, so 2 drafts; no preemption
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].n_draft, 2);
  EXPECT_TRUE(s.preempted.empty());
}

TEST(Scheduler, RejectedDraftsNeverReachThePrefixCache) {
  BlockManager blocks(8, true);
  Scheduler sched(blocks, {4, 32});
  SchedSequence a = make_seq(14);
  sched.add(&a);
  finish_step(sched, sched.schedule(), 7);  // 15 tokens (0..13, 7), 14 computed
  a.draft_tokens = {100, 101, 102, 103};    // would fill block 0 if they counted
  SchedulerStep s = sched.schedule();
  sched.commit(s);
  EXPECT_EQ(blocks.n_indexed(), 0);
  a.tokens.push_back(55);  // the first draft is rejected: 55 sampled instead
  sched.accept_drafts(a, 0);
  EXPECT_EQ(blocks.n_indexed(), 0);
  finish_step(sched, sched.schedule(), 56);  // plain decode of 55: block 0 is full now
  EXPECT_EQ(blocks.n_indexed(), 1);
  std::vector<int32_t> with_draft(a.tokens.begin(), a.tokens.begin() + 15);
  with_draft.push_back(100);
  EXPECT_EQ(blocks.match_prefix(with_draft, 1).blocks.size(), 0u);
  EXPECT_EQ(blocks.match_prefix(std::span<const int32_t>(a.tokens.data(), 16), 1).blocks.size(), 1u);
}

}  // namespace
}  // namespace qs
