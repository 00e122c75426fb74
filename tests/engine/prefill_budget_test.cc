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

TEST(PrefillBudget, TokenCostIsARatioOfAveragesWithNegativeExcessKept) {
  PrefillBudget budget(1.0, 512, 1, 8);
  budget.record(2, 0, 0.040);  // decode step 40 ms
  // Excess over 40 ms: +30 ms for 10 tokens, -10 ms for 10 tokens, +40 ms for 20 tokens.
  budget.record(2, 10, 0.070);
  budget.record(2, 10, 0.030);
  budget.record(2, 20, 0.080);
  // (30 - 10 + 40) ms / (10 + 10 + 20) tokens = 60 / 40 = 1.5 ms per token (the mean of the
  // per-step ratios would be (3 - 1 + 2) / 3 = 1.33 ms, and with the negative one dropped 2.5 ms).
  EXPECT_NEAR(budget.prefill_token_s(), 0.0015, 1e-12);
  EXPECT_EQ(budget.tokens_with_decode(2), 26);  // floor(40 / 1.5) = floor(26.67)
}

TEST(PrefillBudget, NoisyOneTokenChunksDoNotCollapseTheCap) {
  // The collapse seen on a loaded 2-core machine: decode steps of 50.5 ms, 1-token chunks whose
  // excess is noise of +-40 ms around a true cost of 1 ms. Per-step ratios with the negative
  // part dropped gave (41 + 0) / 2 = 20.5 ms per token and a cap of 1 token; the ratio of
  // averages gives (41 - 39) / 2 = 1 ms per token.
  PrefillBudget budget(0.5, 512, 1, 8);
  budget.record(4, 0, 0.0505);
  for (int i = 0; i < 8; ++i) {
    budget.record(4, 1, 0.0915);  // +41 ms
    budget.record(4, 1, 0.0115);  // -39 ms
  }
  EXPECT_NEAR(budget.prefill_token_s(), 0.001, 1e-12);
  EXPECT_EQ(budget.tokens_with_decode(4), 25);  // floor(0.5 * 50.5 / 1) = floor(25.25)
}

TEST(PrefillBudget, FloorKeepsChunksMeasurableAndABadEstimateIsReMeasured) {
  // A bad start: one step descheduled for 2 s makes a 1-token chunk's excess 1.95 s.
  PrefillBudget budget(0.5, 512, 32, 8);
  budget.record(1, 0, 0.050);
  budget.record(1, 1, 2.000);
  EXPECT_NEAR(budget.prefill_token_s(), 1.95, 1e-12);
  // floor(0.5 * 50 / 1950) = 0 tokens: the floor of 32 holds.
  EXPECT_EQ(budget.tokens_with_decode(1), 32);
  // Chunks of 32 tokens at a true cost of 0.8 ms per token (75.6 ms steps) re-measure it. The
  // first is clipped at 2 x (50 + 32 x 1950) ms, i.e. not at all: sums 1.95 + 0.0256 s over 33
  // tokens.
  budget.record(1, 32, 0.0756);
  EXPECT_NEAR(budget.prefill_token_s(), (1.95 + 0.0256) / 33, 1e-12);
  // 14 more fill the window (16 steps); the 17th pushes the stalled sample out:
  // 16 x 25.6 ms / (16 x 32) tokens = 0.8 ms per token, cap floor(0.5 x 50 / 0.8) = 31 -> the floor.
  for (int i = 0; i < 15; ++i) budget.record(1, 32, 0.0756);
  EXPECT_NEAR(budget.prefill_token_s(), 0.0008, 1e-12);
  EXPECT_EQ(budget.tokens_with_decode(1), 32);
  // With slack 1.9: floor(1.9 x 50 / 0.8) = floor(118.75) = 118 tokens.
  PrefillBudget wide(1.9, 512, 32, 8);
  wide.record(1, 0, 0.050);
  wide.record(1, 1, 2.000);
  EXPECT_EQ(wide.tokens_with_decode(1), 32);
  for (int i = 0; i < 16; ++i) wide.record(1, 32, 0.0756);
  EXPECT_EQ(wide.tokens_with_decode(1), 118);
}

TEST(PrefillBudget, StalledStepsAreClippedAtTwiceTheExpectedStep) {
  PrefillBudget budget(1.0, 512, 1, 8);
  budget.record(2, 0, 0.040);   // decode 40 ms
  budget.record(2, 20, 0.080);  // 40 ms for 20 tokens: 2 ms per token
  // A 10 s stall of a 20-token step: expected 40 + 20 x 2 = 80 ms, clipped at 160 ms, excess 120.
  budget.record(2, 20, 10.0);
  EXPECT_NEAR(budget.prefill_token_s(), (0.040 + 0.120) / 40, 1e-12);  // 4 ms per token
  // A stalled decode-only step counts at most twice its average: 0.75 x 40 + 0.25 x 80 = 50 ms.
  budget.record(2, 0, 5.0);
  EXPECT_NEAR(budget.decode_step_s(2), 0.050, 1e-12);
}

TEST(PrefillBudget, ItlLimitLowersTheFloorOnlyWhenAttainable) {
  // Decode 50 ms, 2 ms per prefill token; slack 0.1 allows floor(0.1 x 50 / 2) = 2 tokens.
  const auto primed = [](double itl_limit_s) {
    PrefillBudget b(0.1, 512, 32, 8, itl_limit_s);
    b.record(1, 0, 0.050);
    b.record(1, 10, 0.070);
    return b;
  };
  EXPECT_EQ(primed(0).tokens_with_decode(1), 32);      // no limit: the floor
  EXPECT_EQ(primed(0.200).tokens_with_decode(1), 32);  // 50 + 32 x 2 = 114 ms <= 200 ms
  EXPECT_EQ(primed(0.081).tokens_with_decode(1), 15);  // floor((81 - 50) / 2)
  EXPECT_EQ(primed(0.051).tokens_with_decode(1), 2);   // floor(0.5) -> 1, but slack allows 2
  EXPECT_EQ(primed(0.040).tokens_with_decode(1), 32);  // below a decode step: lost anyway
  EXPECT_THROW(PrefillBudget(1.0, 512, 16, 8, -1.0), std::exception);
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
