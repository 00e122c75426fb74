// Chunked-prefill budget: the cap follows slack * decode_step / prefill_token_cost from the
// recorded step times (engine/prefill_budget.h), and the scheduler honours it only in steps
// that carry decodes.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "engine/prefill_budget.h"
#include "engine/scheduler.h"

namespace qs {
namespace {

TEST(PrefillBudget, UncappedUntilBothCostsAreKnown) {
  PrefillBudget budget(1.0, 512, 16, 8);
  EXPECT_EQ(budget.tokens_with_decode(4), 512);
  budget.record(4, 0, 0.050);  // decode-only: 50 ms
  EXPECT_EQ(budget.tokens_with_decode(4), 512);
}

TEST(PrefillBudget, CapEqualsSlackTimesDecodeStepOverTokenCost) {
  PrefillBudget budget(1.0, 512, 16, 8);
  budget.record(0, 100, 0.200);  // prefill-only: 2 ms per token
  budget.record(3, 0, 0.050);    // decode-only: 50 ms
  // The step may add 1.0 * 50 ms of prefill at 2 ms per token: 25 tokens.
  EXPECT_EQ(budget.tokens_with_decode(3), 25);
  PrefillBudget half(0.5, 512, 16, 8);
  half.record(0, 100, 0.200);
  half.record(3, 0, 0.050);
  EXPECT_EQ(half.tokens_with_decode(3), 16);  // floor(12.5) raised to the minimum
  PrefillBudget one(0.5, 512, 1, 8);
  one.record(0, 100, 0.200);
  one.record(3, 0, 0.050);
  EXPECT_EQ(one.tokens_with_decode(3), 12);  // floor(12.5)
}

TEST(PrefillBudget, MixedStepsMeasureTheExcessOverADecodeStep) {
  PrefillBudget budget(2.0, 512, 1, 8);
  budget.record(2, 0, 0.040);   // decode step 40 ms
  budget.record(2, 20, 0.140);  // 100 ms more for 20 prefill tokens: 5 ms per token
  EXPECT_DOUBLE_EQ(budget.prefill_token_s(), 0.005);
  EXPECT_EQ(budget.tokens_with_decode(2), 16);  // 2.0 * 40 / 5
  // Moving averages: a second decode sample of 80 ms gives 0.75 * 40 + 0.25 * 80 = 50 ms.
  budget.record(2, 0, 0.080);
  EXPECT_NEAR(budget.decode_step_s(2), 0.050, 1e-12);
  EXPECT_EQ(budget.tokens_with_decode(2), 20);
}

TEST(PrefillBudget, MixedStepCostReplacesThePrefillOnlyBootstrap) {
  PrefillBudget budget(1.0, 512, 1, 8);
  budget.record(0, 512, 0.512);  // 1 ms per token in a large prefill-only chunk
  budget.record(1, 0, 0.100);
  EXPECT_EQ(budget.tokens_with_decode(1), 100);
  budget.record(1, 10, 0.150);  // next to a decode: 50 ms for 10 tokens, 5 ms per token
  EXPECT_DOUBLE_EQ(budget.prefill_token_s(), 0.005);
  EXPECT_EQ(budget.tokens_with_decode(1), 20);
  budget.record(0, 512, 0.256);  // later prefill-only steps no longer move the cap
  EXPECT_EQ(budget.tokens_with_decode(1), 20);
}

TEST(PrefillBudget, DecodeStepCostIsKeptPerDecodeCount) {
  PrefillBudget budget(1.0, 512, 1, 8);
  budget.record(1, 0, 0.100);
  budget.record(8, 0, 0.300);
  budget.record(1, 10, 0.150);  // 5 ms per prefill token
  EXPECT_EQ(budget.tokens_with_decode(1), 20);  // 100 ms / 5 ms
  EXPECT_EQ(budget.tokens_with_decode(8), 60);  // 300 ms / 5 ms
  // Unmeasured counts: the nearest measured count below (4 -> the 1-decode step).
  EXPECT_DOUBLE_EQ(budget.decode_step_s(4), 0.100);
  // Counts beyond max_decode use the last slot.
  EXPECT_DOUBLE_EQ(budget.decode_step_s(50), 0.300);
  PrefillBudget above(1.0, 512, 1, 8);
  above.record(4, 0, 0.200);
  // Nothing measured below 2: the 4-decode step scaled by 2 / 4.
  EXPECT_DOUBLE_EQ(above.decode_step_s(2), 0.100);
}

TEST(PrefillBudget, NeverAboveMaxBatchedTokensAndZeroSlackDisables) {
  PrefillBudget budget(1.0, 64, 16, 8);
  budget.record(0, 100, 0.001);
  budget.record(1, 0, 1.0);
  EXPECT_EQ(budget.tokens_with_decode(1), 64);
  PrefillBudget off(0.0, 512, 16, 8);
  off.record(0, 100, 0.200);
  off.record(1, 0, 0.050);
  EXPECT_EQ(off.tokens_with_decode(1), 512);
  EXPECT_THROW(PrefillBudget(-1.0, 512, 16, 8), std::exception);
  EXPECT_THROW(PrefillBudget(1.0, 512, 16, 0), std::exception);
}

SchedSequence make_seq(int64_t n_prompt, int32_t first_token) {
  SchedSequence s;
  s.tokens.resize(static_cast<size_t>(n_prompt));
  std::iota(s.tokens.begin(), s.tokens.end(), first_token);
  s.n_prompt = n_prompt;
  return s;
}

TEST(Scheduler, PrefillLimitAppliesOnlyNextToDecodes) {
  BlockManager blocks(64, true);
  Scheduler sched(blocks, {4, 512});
  sched.set_prefill_limit_with_decode(16);
  SchedSequence a = make_seq(40, 0), b = make_seq(100, 5000);
  sched.add(&a);
  SchedulerStep s1 = sched.schedule();  // nobody decodes: the whole prompt in one chunk
  ASSERT_EQ(s1.chunks.size(), 1u);
  EXPECT_EQ(s1.chunks[0].n, 40);
  sched.commit(s1);
  a.tokens.push_back(1);
  sched.add(&b);
  int64_t b_done = 0;
  for (int step = 0; step < 7; ++step) {  // a decodes every step; b prefills 16 at a time
    SchedulerStep s = sched.schedule();
    ASSERT_EQ(s.chunks.size(), 2u);
    EXPECT_EQ(s.chunks[0].seq, &a);
    EXPECT_EQ(s.chunks[0].n, 1);
    EXPECT_EQ(s.chunks[1].seq, &b);
    EXPECT_EQ(s.chunks[1].n, std::min<int64_t>(16, 100 - b_done));
    b_done += s.chunks[1].n;
    sched.commit(s);
    for (const auto& c : s.chunks) {
      if (c.needs_logits) c.seq->tokens.push_back(1);
    }
  }
  EXPECT_EQ(b_done, 100);
}

}  // namespace
}  // namespace qs
