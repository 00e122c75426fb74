// TTFT prediction from a load snapshot (engine/ttft_predictor.h): expected values worked out by
// hand from the model in the header comment.
#include <gtest/gtest.h>

#include "engine/ttft_predictor.h"

namespace qs {
namespace {

TEST(TtftPredictor, NothingLearnedPredictsZero) {
  LoadSnapshot s;
  s.running_prefill_tokens = 1000;
  EXPECT_EQ(predict_ttft_s(s, 100, 0), 0.0);
}

TEST(TtftPredictor, IdleEngineIsTheOwnPrefill) {
  LoadSnapshot s;
  s.max_num_seqs = 4;
  s.prefill_token_s = 0.001;
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), 0.100, 1e-12);
  EXPECT_NEAR(predict_ttft_s(s, 100, 0, 3), 0.300, 1e-12);  // three choices, three prefills
  s.prefix_hit_ratio = 0.5;                                    // half of a prompt expected cached
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), 0.050, 1e-12);
}

TEST(TtftPredictor, WorkAheadOfItsPriorityAndDecodeSteps) {
  LoadSnapshot s;
  s.max_num_seqs = 16;
  s.running = 2;
  s.running_remaining_tokens = {5, 9};
  s.running_prefill_tokens = 30;
  s.waiting_tokens_by_priority = {{0, 70}, {5, 1000}};
  s.waiting_count_by_priority = {{0, 1}, {5, 3}};
  s.decode_step_s = 0.02;
  s.prefill_token_s = 0.001;
  s.prefill_tokens_per_step = 50;
  // priority 0: 30 + 70 + own 100 = 200 tokens = 0.2 s, in ceil(200 / 50) = 4 steps of 0.02 s.
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), 0.2 + 4 * 0.02, 1e-12);
  // priority 5 also waits for the 1000 tokens of its class: 1200 tokens, 24 steps.
  EXPECT_NEAR(predict_ttft_s(s, 100, 5), 1.2 + 24 * 0.02, 1e-12);
  // priority -1 passes every waiting sequence: 130 tokens, 3 steps.
  EXPECT_NEAR(predict_ttft_s(s, 100, -1), 0.13 + 3 * 0.02, 1e-12);
  // Submitted but not yet scheduled requests count whatever their priority.
  s.incoming_sequences = 1;
  s.incoming_tokens = 50;
  EXPECT_NEAR(predict_ttft_s(s, 100, -1), 0.18 + 4 * 0.02, 1e-12);
}

TEST(TtftPredictor, FullSlotsWaitForTheShortestRunningSequence) {
  LoadSnapshot s;
  s.max_num_seqs = 2;
  s.running = 2;
  s.running_remaining_tokens = {10, 40};
  s.decode_step_s = 0.02;
  s.prefill_token_s = 0.001;
  s.prefill_tokens_per_step = 1000;
  // One slot frees after 10 decode steps (0.2 s), then its own 100 tokens: 0.1 s + one step.
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), 0.2 + 0.1 + 0.02, 1e-12);
  // With one sequence of its class waiting ahead, it needs the second slot: 40 steps.
  s.waiting_count_by_priority = {{0, 1}};
  s.waiting_tokens_by_priority = {{0, 10}};
  EXPECT_NEAR(predict_ttft_s(s, 100, 0), 0.8 + 0.1 + 0.02, 1e-12);
}

}  // namespace
}  // namespace qs
