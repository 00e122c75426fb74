// TTFT prediction from a load snapshot (engine/ttft_predictor.h) and the learned step costs
// (engine/step_costs.h). The expected values of the queue states below were worked out by hand,
// step by step, from the scheduler's rules (engine/scheduler.h) and the cost model; the replay
// test runs the real Scheduler on random queue states and compares.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <memory>
#include <numeric>
#include <random>

#include "engine/scheduler.h"
#include "engine/step_costs.h"
#include "engine/ttft_predictor.h"

namespace qs {
namespace {

// ---- StepCosts ------------------------------------------------------------------------------

TEST(StepCosts, DecodeCostsInterpolateAndExtrapolate) {
  StepCosts c(8);
  EXPECT_FALSE(c.known());
  EXPECT_EQ(c.decode_s(1), 0.0);
  c.record(1, 0, 0.010);
  EXPECT_DOUBLE_EQ(c.decode_s(1), 0.010);
  EXPECT_DOUBLE_EQ(c.decode_s(5), 0.010);  // one count measured: flat
  c.record(4, 0, 0.025);
  EXPECT_NEAR(c.decode_s(2), 0.015, 1e-12);  // linear between 1 and 4
  EXPECT_NEAR(c.decode_s(3), 0.020, 1e-12);
  EXPECT_NEAR(c.decode_s(6), 0.035, 1e-12);  // slope (0.025 - 0.010) / 3 beyond 4
  c.record(1, 0, 0.014);                      // moving average, 1/4 on the newest
  EXPECT_NEAR(c.decode_s(1), 0.75 * 0.010 + 0.25 * 0.014, 1e-12);
}

TEST(StepCosts, PrefillCostPerChunkSizeBucket) {
  StepCosts c(4);
  c.record(1, 100, 0.5);  // the decode part is not known yet: no prefill sample
  EXPECT_FALSE(c.known());
  c.record(1, 0, 0.010);
  c.record(2, 0, 0.015);
  c.record(2, 100, 0.015 + 100 * 0.002);  // 100 tokens: bucket [64, 128)
  c.record(1, 8, 0.010 + 8 * 0.0005);     // 8 tokens: bucket [8, 16)
  EXPECT_TRUE(c.known());
  EXPECT_NEAR(c.prefill_token_s(100), 0.002, 1e-12);
  EXPECT_NEAR(c.prefill_token_s(9), 0.0005, 1e-12);
  EXPECT_NEAR(c.prefill_token_s(20), 0.0005, 1e-12);  // [16, 32): nearest measured is [8, 16)
  EXPECT_NEAR(c.prefill_token_s(40), 0.002, 1e-12);   // [32, 64): nearest measured is [64, 128)
  EXPECT_NEAR(c.step_s(2, 100), 0.015 + 0.2, 1e-12);
  // No logits row: one row carries the step's fixed cost, 99 more tokens.
  EXPECT_NEAR(c.step_s(0, 100), 0.010 + 99 * 0.002, 1e-12);
  // Learning inverts the same model: 101 tokens without logits = 1 + 100 at 0.003 s.
  c.record(0, 101, 0.010 + 100 * 0.003);
  EXPECT_NEAR(c.prefill_token_s(100), 0.75 * 0.002 + 0.25 * 0.003, 1e-12);
  EXPECT_EQ(c.step_s(0, 0), 0.0);
}

TEST(StepCosts, PrefillCostIsARatioOfAveragesNotAnAverageOfClampedRatios) {
  StepCosts c(4);
  c.record(1, 0, 0.010);
  // Two noisy steps with 2 prefill tokens (bucket [2, 4)): 1 ms under and 9 ms over d(1).
  // Averaging per-step ratios clamped at 0 would give 0.25 x 9 / 2 = 1.125 ms/token (the noise
  // below the decode cost lost, the noise above kept); the ratio of the averages keeps both:
  // (0.75 x -1 + 0.25 x 9) / (0.75 x 2 + 0.25 x 2) = 0.75 ms/token.
  c.record(1, 2, 0.009);
  c.record(1, 2, 0.019);
  EXPECT_NEAR(c.prefill_token_s(2), 0.00075, 1e-12);
  // Chunk sizes within a bucket are weighted by their tokens: 3 tokens 3 ms over d(1) next:
  // (0.75 x 1.5 + 0.25 x 3) / (0.75 x 2 + 0.25 x 3) = 1.875 / 2.25 ms/token.
  c.record(1, 3, 0.013);
  EXPECT_NEAR(c.prefill_token_s(3), 0.001875 / 2.25, 1e-12);
  // A bucket whose steps ran below the decode cost on average is free, never negative.
  c.record(1, 8, 0.005);
  EXPECT_EQ(c.prefill_token_s(8), 0.0);
}

TEST(StepCosts, AStalledStepCountsAsTwiceTheAverageAtMost) {
  StepCosts c(4);
  c.record(2, 0, 0.015);
  c.record(2, 0, 0.100);  // descheduled: counted as 30 ms
  EXPECT_NEAR(c.decode_s(2), 0.75 * 0.015 + 0.25 * 0.030, 1e-12);
  c.record(1, 0, 0.010);
  c.record(1, 100, 0.010 + 0.100);  // 1 ms per token in [64, 128)
  c.record(1, 100, 1.0);            // counted as 2 x 110 ms: 210 ms over d(1)
  EXPECT_NEAR(c.prefill_token_s(100), (0.75 * 0.100 + 0.25 * 0.210) / 100, 1e-12);
  // A sustained slowdown still comes through, by at most 1/4 a step: 4 steps of 10x.
  double expected = c.decode_s(2);
  for (int i = 0; i < 4; ++i) {
    c.record(2, 0, 0.150);
    expected = 0.75 * expected + 0.25 * std::min(0.150, 2 * expected);
  }
  EXPECT_NEAR(c.decode_s(2), expected, 1e-12);
  EXPECT_GT(c.decode_s(2), 2 * 0.015);
}

// ---- Hand-computed queue states ---------------------------------------------------------------

// d(1) = 10 ms, d(2) = 15 ms, d(3) = 20 ms (d(n > 3) extrapolates to 20 + 5 (n - 3) ms), 1 ms
// per prefill token at every chunk size.
StepCosts costs() {
  StepCosts c(8);
  c.record(1, 0, 0.010);
  c.record(2, 0, 0.015);
  c.record(3, 0, 0.020);
  for (int b = 0; b < 11; ++b) c.record(1, int64_t{1} << b, 0.010 + static_cast<double>(int64_t{1} << b) * 0.001);
  return c;
}

LoadSnapshot snapshot(int64_t max_num_seqs, int64_t chunk = 512) {
  LoadSnapshot s;
  s.max_num_seqs = max_num_seqs;
  s.max_batched_tokens = 512;
  s.prefill_chunk.assign(static_cast<size_t>(max_num_seqs) + 1, chunk);
  s.costs = costs();
  return s;
}

PendingSequence decoding(int64_t max_tokens, int64_t generated) { return {0, false, 0, max_tokens, generated}; }

TEST(TtftPredictor, NothingLearnedPredictsZero) {
  LoadSnapshot s;
  s.waiting.push_back({0, false, 1000, 10, 0});
  EXPECT_EQ(predict_ttft_s(s, 100, 0), 0.0);
}

TEST(TtftPredictor, IdleEngine) {
  LoadSnapshot s = snapshot(4);
  // One step: 1 logits row + 99 tokens.
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), 0.010 + 0.099, 1e-12);
  // 1000 tokens in chunks of 512: 512 without logits (1 row + 511), then 488 (1 row + 487).
  EXPECT_NEAR(predict_ttft_s(s, 1000, 0), (0.010 + 0.511) + (0.010 + 0.487), 1e-12);
  // Two choices fit one step: 2 logits rows + 198 tokens.
  EXPECT_NEAR(predict_ttft_s(s, 100, 0, 2), 0.015 + 0.198, 1e-12);
  // Half of a prompt expected from the prefix cache: 50 tokens.
  s.prefix_hit_ratio = 0.5;
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), 0.010 + 0.049, 1e-12);
}

TEST(TtftPredictor, ChunksNextToRunningDecodes) {
  LoadSnapshot s = snapshot(4, 50);  // 50 prefill tokens per step next to decodes
  s.running = {decoding(100, 10), decoding(100, 10)};
  s.step_in_progress = true;
  s.step_age_s = 0.005;
  // Step 1 (in progress, 5 ms spent): the two decodes, 15 - 5 ms. Steps 2, 3: decodes + 50
  // tokens (15 + 50 ms). Step 4: decodes + the last 20 tokens with logits (3 rows, 20 + 19 ms).
  EXPECT_NEAR(predict_ttft_s(s, 120, 0), 0.010 + 0.065 + 0.065 + 0.039, 1e-12);
  // Its parts: admitted in step 2 (after 10 ms), 4 steps of which 1 without prefill, 120 tokens.
  const TtftPrediction p = predict_ttft(s, 120, 0);
  EXPECT_NEAR(p.queue_s, 0.010, 1e-12);
  EXPECT_EQ(p.steps, 4);
  EXPECT_EQ(p.decode_only_steps, 1);
  EXPECT_EQ(p.prefill_tokens, 120);
  EXPECT_EQ(p.ahead, 2);
}

TEST(TtftPredictor, FullSlotsWaitForTheFirstSequenceToEnd) {
  LoadSnapshot s = snapshot(2, 100);
  s.running = {decoding(13, 10), decoding(15, 10)};  // 3 and 5 tokens left
  s.step_in_progress = true;
  // Step 1: 15 ms (2 and 4 left); steps 2-3 in one stride: 2 x 15 ms, the first one ends;
  // step 4: one decode + its 10 tokens (2 rows + 9 tokens).
  EXPECT_NEAR(predict_ttft_s(s, 10, 0), 0.015 + 0.030 + 0.024, 1e-12);
  // Expected outputs: with half of max_tokens used on average a sequence with 40 and 10 done
  // ends after 10 more (20 in all), not 30.
  LoadSnapshot one = snapshot(1, 100);
  one.running = {decoding(40, 10)};
  one.step_in_progress = true;
  EXPECT_NEAR(predict_ttft_s(one, 10, 0), 0.010 + 29 * 0.010 + 0.019, 1e-12);
  one.output_ratio = 0.5;
  EXPECT_NEAR(predict_ttft_s(one, 10, 0), 0.010 + 9 * 0.010 + 0.019, 1e-12);
}

TEST(TtftPredictor, OutputLengthsAreDrawnFromFinishedSequencesGivenWhatRanAlready) {
  // One slot, a sequence with max_tokens 40 and 10 generated; finished sequences ended at half of
  // max_tokens 12 times and at max_tokens 4 times (mean 0.625, i.e. 25 of 40).
  LoadSnapshot s = snapshot(1, 100);
  s.running = {decoding(40, 10)};
  s.step_in_progress = true;
  s.output_ratio = 0.625;
  s.output_samples.assign(12, 0.5);
  s.output_samples.insert(s.output_samples.end(), 4, 1.0);
  // The median of the 15 replays: quantiles (i + 1/2) / 15 of {20 x 12, 40 x 4}; 11 of them draw
  // 20, so the sequence ends after 10 more tokens (step 1 + 9), then the request's 10 tokens
  // (1 row + 9). The mean rule would say 25 (15 more).
  EXPECT_NEAR(predict_ttft_s(s, 10, 0), 0.010 + 9 * 0.010 + 0.019, 1e-12);
  // Past 20 tokens only the runs to max_tokens outlive it: 40, 15 more (the mean rule: 1 more).
  s.running = {decoding(40, 25)};
  EXPECT_NEAR(predict_ttft_s(s, 10, 0), 0.010 + 14 * 0.010 + 0.019, 1e-12);
  // Outliving every sample: one more token.
  s.running = {decoding(40, 39)};
  EXPECT_NEAR(predict_ttft_s(s, 10, 0), 0.010 + 0.019, 1e-12);
  // Ratios scale to the sequence's own max_tokens: 0.5 of 60 is 30.
  s.running = {decoding(60, 10)};
  EXPECT_NEAR(predict_ttft_s(s, 10, 0), 0.010 + 19 * 0.010 + 0.019, 1e-12);
  // Fewer than kMinOutputSamples finished: the mean rule (25 of 40).
  s.running = {decoding(40, 10)};
  s.output_samples.assign(kMinOutputSamples - 1, 0.5);
  EXPECT_NEAR(predict_ttft_s(s, 10, 0), 0.010 + 14 * 0.010 + 0.019, 1e-12);
}

TEST(TtftPredictor, AFreeSlotComesWithTheFirstOfTheRunningSequencesToEnd) {
  // Two slots, both busy with max_tokens 40 and 10 generated; half of the finished sequences ended
  // at 20, half at 40. Replay i draws quantile u = (i + 1/2) / 15 for the first sequence and
  // frac(u + 0.618...) for the second: the slot frees after 10 more tokens when either draws 20
  // (u < 1/2), which 13 of the 15 replays do (i = 0..6 by the first, i = 6..12 by the second), so
  // the median replay waits 10 tokens. One replay on the mean (30) would wait 20.
  LoadSnapshot s = snapshot(2, 100);
  s.running = {decoding(40, 10), decoding(40, 10)};
  s.step_in_progress = true;
  s.output_ratio = 0.75;
  s.output_samples.assign(8, 0.5);
  s.output_samples.insert(s.output_samples.end(), 8, 1.0);
  // Step 1: two decodes (15 ms); 9 more two-decode steps; then one decode + the 10 prompt tokens
  // (2 rows + 9 tokens: 15 + 9 ms).
  EXPECT_NEAR(predict_ttft_s(s, 10, 0), 0.015 + 9 * 0.015 + 0.024, 1e-12);
}

TEST(TtftPredictor, SpeculativeDecodingVerifiesDraftsInEveryDecode) {
  // Two drafts per decode, priced like prefill tokens of the step (1 ms each here).
  LoadSnapshot s = snapshot(4, 50);
  s.running = {decoding(100, 10), decoding(100, 10)};
  s.step_in_progress = true;
  s.step_age_s = 0.005;
  s.draft_tokens_per_decode = 2;
  s.tokens_per_decode = 1;
  // Step 1: 2 decodes + 4 drafts, 15 + 4 - 5 ms. Steps 2, 3: the same + 50 prompt tokens
  // (2 rows + 54 tokens). Step 4: the last 20 with logits (3 rows + 4 + 19 tokens).
  EXPECT_NEAR(predict_ttft_s(s, 120, 0), 0.014 + 0.069 + 0.069 + 0.043, 1e-12);
  // A decode that gains 3 tokens a step ends sooner: 30 tokens left. Step 1: 1 decode + 2 drafts
  // (12 ms), 27 left; steps 2-10 in one stride of ceil(27 / 3) = 9 steps of 12 ms; step 11: the
  // prompt's 10 tokens (1 row + 9).
  LoadSnapshot one = snapshot(1, 100);
  one.running = {decoding(40, 10)};
  one.step_in_progress = true;
  one.draft_tokens_per_decode = 2;
  one.tokens_per_decode = 3;
  EXPECT_NEAR(predict_ttft_s(one, 10, 0), 0.012 + 9 * 0.012 + 0.019, 1e-12);
  // Fractional means: 0.5 drafts a decode, 1.5 tokens gained: 30 left. Step 1: llround(0.5) = 1
  // draft (11 ms), 28.5 left; a stride of ceil(28.5 / 1.5) = 19 steps of 11 ms; then 19 ms.
  one.draft_tokens_per_decode = 0.5;
  one.tokens_per_decode = 1.5;
  EXPECT_NEAR(predict_ttft_s(one, 10, 0), 0.011 + 19 * 0.011 + 0.019, 1e-12);
}

TEST(TtftPredictor, QueueOrderPriorityAndPreemption) {
  LoadSnapshot s = snapshot(8);
  s.running = {{0, false, 600, 50, 0}};  // prefilling: the step in progress takes 512 of its 600
  s.waiting = {{9, true, 40, 20, 5}, {0, false, 60, 50, 0}, {5, false, 1000, 50, 0}};
  s.step_in_progress = true;
  s.step_age_s = 10;  // step 1 is as good as done
  // Priority 0: step 2 ends the running prompt (88), admits the preempted sequence (at the front
  // whatever its class), the one of class 0, and 324 of its 600 tokens (3 rows + 509 tokens);
  // step 3: 3 decodes, its last 276 and, in what is left, 233 of the class-5 sequence behind it
  // (4 rows + 275 + 233).
  EXPECT_NEAR(predict_ttft_s(s, 600, 0), (0.020 + 0.509) + (0.025 + 0.508), 1e-12);
  // Priority -1: only the preempted one is ahead. Step 2: 88 + 40 + 384 of its tokens (2 rows +
  // 510); step 3: 2 decodes, its last 216, then the class-0 60 and 234 of the class-5 one
  // (4 rows + 215 + 59 + 234).
  EXPECT_NEAR(predict_ttft_s(s, 600, -1), (0.015 + 0.510) + (0.025 + 0.508), 1e-12);
  // Priority 5: behind the 1000 tokens of class 5 too. Step 2: 88 + 40 + 60 + 324 of them
  // (3 rows + 509); step 3: 3 decodes + 509 of them; step 4: 3 decodes, their last 167 and 342 of
  // its own (4 rows + 166 + 342); step 5: 4 decodes and its last 258 (5 rows, d(5) = 30 ms, + 257).
  EXPECT_NEAR(predict_ttft_s(s, 600, 5), (0.020 + 0.509) + (0.020 + 0.509) + (0.025 + 0.508) + (0.030 + 0.257), 1e-12);
}

TEST(TtftPredictor, RequestsNotYetInTheSnapshot) {
  LoadSnapshot s = snapshot(4);
  s.step_in_progress = true;  // the engine took one request for the step it runs
  s.step_age_s = 0.05;
  s.taken = {1, 200, 10};
  s.incoming = {2, 300, 20};
  // Step 1: the taken one, 200 tokens (1 row + 199), 50 ms of it spent. Step 2: its decode, the
  // two submitted ones (150 each) and this one (4 rows + 149 + 149 + 99).
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), (0.209 - 0.05) + (0.025 + 0.397), 1e-12);
}

// ---- Replay against the real scheduler ------------------------------------------------------

struct Seq : SchedSequence {
  int64_t max_tokens = 1;
  bool target = false;
  int64_t n_output() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
};

std::unique_ptr<Seq> make_seq(std::mt19937& rng, int32_t priority) {
  auto s = std::make_unique<Seq>();
  const int64_t n = std::uniform_int_distribution<int64_t>(1, 90)(rng);
  s->tokens.resize(static_cast<size_t>(n));
  std::iota(s->tokens.begin(), s->tokens.end(), static_cast<int32_t>(rng() % 100000));
  s->n_prompt = n;
  s->max_tokens = std::uniform_int_distribution<int64_t>(1, 25)(rng);
  s->priority = priority;
  return s;
}

struct Replay {
  Replay(int32_t max_num_seqs, int64_t max_batched, std::vector<int64_t> chunk, const StepCosts& costs)
      : blocks(8192, false), sched(blocks, {max_num_seqs, max_batched}), chunk(std::move(chunk)), costs(costs) {}

  // One engine step: the prefill cap for the decodes about to run, plan, cost, commit, emit.
  // Returns the step's cost; `target_done` when the target got its first token.
  double step(bool& target_done) {
    const auto& running = sched.running();
    const auto n_dec = std::count_if(running.begin(), running.end(), [](const SchedSequence* s) { return s->n_remaining() == 1; });
    sched.set_prefill_limit_with_decode(chunk[static_cast<size_t>(std::max<int64_t>(n_dec, 1))]);
    const SchedulerStep plan = sched.schedule();
    int64_t logits = 0;
    for (const auto& c : plan.chunks) logits += c.needs_logits ? 1 : 0;
    const double cost = costs.step_s(logits, plan.n_tokens() - logits);
    sched.commit(plan);
    for (const auto& c : plan.chunks) {
      if (!c.needs_logits) continue;
      auto* s = static_cast<Seq*>(c.seq);
      if (s->target && s->n_output() == 0) target_done = true;
      s->tokens.push_back(7);
      if (s->n_output() >= s->max_tokens) sched.remove(s);
    }
    return cost;
  }

  LoadSnapshot snapshot() const {
    LoadSnapshot s;
    s.max_num_seqs = sched.options().max_num_seqs;
    s.max_batched_tokens = sched.options().max_batched_tokens;
    s.prefill_chunk = chunk;
    s.costs = costs;
    const auto pending = [](const SchedSequence* p, int64_t prefill) {
      const auto* q = static_cast<const Seq*>(p);
      return PendingSequence{q->priority, q->n_preemptions > 0, prefill, q->max_tokens, q->n_output()};
    };
    for (const SchedSequence* p : sched.running()) s.running.push_back(pending(p, p->n_remaining() >= 2 ? p->n_remaining() : 0));
    for (const SchedSequence* p : sched.waiting()) s.waiting.push_back(pending(p, static_cast<int64_t>(p->tokens.size())));
    s.step_in_progress = !s.running.empty() || !s.waiting.empty();
    return s;
  }

  BlockManager blocks;
  Scheduler sched;
  std::vector<int64_t> chunk;
  StepCosts costs;
  std::vector<std::unique_ptr<Seq>> owned;
};

TEST(TtftPredictor, AgreesWithTheSchedulerReplayedStepByStep) {
  // Costs that differ per row count and chunk size, so that a wrong step composition shows.
  StepCosts c(8);
  for (int n = 1; n <= 8; ++n) c.record(n, 0, 0.004 + 0.0013 * n + 0.0002 * n * n);
  for (int b = 0; b < 8; ++b) c.record(1, int64_t{1} << b, c.decode_s(1) + static_cast<double>(int64_t{1} << b) * (0.0003 + 0.00011 * b));
  std::mt19937 rng(12);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t max_num_seqs = std::array<int32_t, 4>{1, 2, 4, 8}[trial % 4];
    const int64_t max_batched = std::array<int64_t, 3>{16, 64, 200}[(trial / 4) % 3];
    std::vector<int64_t> chunk(static_cast<size_t>(max_num_seqs) + 1, max_batched);
    for (auto& v : chunk) v = std::uniform_int_distribution<int64_t>(1, max_batched)(rng);
    Replay r(max_num_seqs, std::max<int64_t>(max_batched, max_num_seqs), chunk, c);
    const int n_before = static_cast<int>(rng() % 8);
    const int warm_steps = static_cast<int>(rng() % 12);
    for (int i = 0; i < n_before; ++i) {
      r.owned.push_back(make_seq(rng, static_cast<int32_t>(rng() % 3)));
      r.sched.add(r.owned.back().get());
    }
    bool ignored = false;
    for (int i = 0; i < warm_steps && (!r.sched.running().empty() || !r.sched.waiting().empty()); ++i) r.step(ignored);
    const int32_t priority = static_cast<int32_t>(rng() % 3);
    const int64_t prompt = std::uniform_int_distribution<int64_t>(1, 150)(rng);
    const LoadSnapshot load = r.snapshot();
    const double predicted = predict_ttft_s(load, prompt, priority);
    // The real thing: the step in progress (if any) runs without the request; it joins after.
    double measured = 0;
    bool done = false;
    if (load.step_in_progress) measured += r.step(done);
    auto own = std::make_unique<Seq>();
    own->tokens.assign(static_cast<size_t>(prompt), 3);
    own->n_prompt = prompt;
    own->max_tokens = 5;
    own->priority = priority;
    own->target = true;
    r.sched.add(own.get());
    r.owned.push_back(std::move(own));
    for (int i = 0; i < 100000 && !done; ++i) measured += r.step(done);
    ASSERT_TRUE(done);
    ASSERT_NEAR(predicted, measured, 1e-9) << "trial " << trial << ": max_num_seqs " << max_num_seqs << ", max_batched "
                                           << max_batched << ", " << n_before << " sequences, " << warm_steps << " steps";
    ++compared;
  }
  EXPECT_EQ(compared, 300);
}

}  // namespace
}  // namespace qs
