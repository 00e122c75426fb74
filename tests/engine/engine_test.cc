// Engine (continuous batching) on an in-memory random model: batch invariance under concurrent
// load, chunked prefill, stop strings, cancellation and KV block accounting.
#include <gtest/gtest.h>

#include <thread>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/stop_matcher.h"
#include "support/engine_test_support.h"
#include "support/random_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace qs {
namespace {

TEST_F(EngineFixture, ConcurrentGreedyRequestsMatchTheirSoloRuns) {
  std::vector<std::vector<int32_t>> prompts;
  std::mt19937 rng(7);
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> p(3 + (i * 7) % 45);  // 3..47 tokens: several need chunked prefill
    for (auto& t : p) t = static_cast<int32_t>(rng() % 256);
    prompts.push_back(p);
  }
  std::vector<Collected> solo;
  {
    Engine engine(*backend, tokenizer, engine_options(1, 32));
    for (const auto& p : prompts) solo.push_back(collect(*engine.submit(greedy_request(p, 12))));
  }
  Engine engine(*backend, tokenizer, engine_options(16, 32));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& p : prompts) streams.push_back(engine.submit(greedy_request(p, 12)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Collected together = collect(*streams[i]);
    EXPECT_EQ(together.tokens, solo[i].tokens) << "request " << i;
    EXPECT_EQ(together.finish_reason, solo[i].finish_reason);
  }
  const EngineStats st = settled_stats(engine);
  EXPECT_EQ(st.kv_blocks_referenced, 0);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
}

TEST_F(EngineFixture, CancelFreesBlocksAndOthersContinue) {
  // Without the degenerate-output guard: the random model's greedy output loops, and a guard stop
  // could end the victim before the cancel arrives (and `other` before 20 tokens).
  EngineOptions options = engine_options(4, 32);
  options.guard.enabled = false;
  Engine engine(*backend, tokenizer, options);
  auto victim = engine.submit(greedy_request({1, 2, 3}, 200));
  auto other = engine.submit(greedy_request({4, 5, 6}, 20));
  EngineEvent e;
  ASSERT_TRUE(victim->pop(e, std::chrono::milliseconds(30000)));
  victim->cancel();
  const Collected cancelled = collect(*victim);
  EXPECT_EQ(cancelled.finish_reason, "cancelled");
  const Collected done = collect(*other);
  EXPECT_EQ(done.tokens.size() == 20 || done.finish_reason == "stop", true);
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineFixture, RequestLongerThanContextIsAnError) {
  Engine engine(*backend, tokenizer, engine_options(4, 32));
  const Collected c = collect(*engine.submit(greedy_request(std::vector<int32_t>(250, 5), 10)));
  EXPECT_FALSE(c.error.empty());
  EXPECT_NE(c.error.find("260"), std::string::npos) << c.error;
}

TEST_F(EngineFixture, RequestLargerThanTheKvCacheIsRejectedAtAdmission) {
  auto small_backend = cpu_test_backend(model, KvDType::kF16, 4, 32, 256);  // 64 tokens of KV
  EngineOptions options = engine_options(4, 32);
  options.guard.enabled = false;  // the last request runs to max_tokens
  Engine engine(*small_backend, tokenizer, options);
  const SubmitResult r = engine.try_submit(greedy_request(std::vector<int32_t>(40, 5), 40));
  EXPECT_EQ(r.stream, nullptr);
  EXPECT_EQ(r.rejection, EngineErrorCode::kInvalid);
  EXPECT_NE(r.message.find("80"), std::string::npos) << r.message;  // 40 + 40 needed
  EXPECT_NE(r.message.find("64"), std::string::npos) << r.message;  // 4 blocks * 16
  EXPECT_EQ(engine.context_tokens(), 64);
  // One that fits still runs.
  EXPECT_EQ(collect(*engine.submit(greedy_request(std::vector<int32_t>(40, 5), 24))).tokens.size(), 24u);
}

TEST_F(EngineFixture, MinTokensSuppressesStopTokensUntilReached) {
  // A +100 bias makes token 65 the greedy pick wherever it is allowed, and it is a stop token:
  // without min_tokens it ends the output at once; with min_tokens = k the first k tokens are
  // something else and token k + 1 is the stop (vLLM's rule).
  Engine engine(*backend, tokenizer, engine_options(4, 32));
  for (int32_t k : {0, 1, 4, 11}) {
    EngineRequest r = greedy_request({10, 20, 30}, 24);
    r.sampling.logit_bias = {{65, 100.0f}};
    r.stop_token_ids = {65, 66};
    r.min_tokens = k;
    const Collected c = collect(*engine.submit(r));
    ASSERT_EQ(c.tokens.size(), static_cast<size_t>(k + 1)) << "min_tokens " << k;
    EXPECT_EQ(c.tokens.back(), 65);
    for (int32_t i = 0; i < k; ++i) EXPECT_TRUE(c.tokens[i] != 65 && c.tokens[i] != 66) << i;
    EXPECT_EQ(c.finish_reason, "stop");
  }
  // Sampled rows too: the suppressed stop is never drawn, and min_tokens above max_tokens runs to
  // max_tokens.
  EngineRequest r = greedy_request({10, 20, 30}, 6);
  r.sampling.temperature = 0.8f;
  r.sampling.seed = 5;
  r.sampling.logit_bias = {{65, 100.0f}};
  r.stop_token_ids = {65};
  r.min_tokens = 100;
  const Collected c = collect(*engine.submit(r));
  EXPECT_EQ(c.tokens.size(), 6u);
  EXPECT_EQ(std::count(c.tokens.begin(), c.tokens.end(), 65), 0);
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineFixture, IgnoreEosTurnsTheOutputGuardOffAndMinTokensHoldsItOff) {
  // One token forced 40 times: the guard (on by default) cuts a 16-fold repeat, ignore_eos asks
  // for exactly max_tokens.
  Engine engine(*backend, tokenizer, engine_options(4, 32));
  EngineRequest r = greedy_request({10, 20, 30}, 40);
  r.sampling.logit_bias = {{65, 100.0f}};
  const Collected guarded = collect(*engine.submit(r));
  EXPECT_LT(guarded.tokens.size(), 40u);
  EXPECT_EQ(guarded.stop_cause, "degenerate_repetition");
  r.ignore_eos = true;
  const Collected exact = collect(*engine.submit(r));
  EXPECT_EQ(exact.tokens, std::vector<int32_t>(40, 65));
  EXPECT_EQ(exact.finish_reason, "length");
  // min_tokens holds the guard off until it is reached (vLLM promises that many tokens).
  r.ignore_eos = false;
  r.min_tokens = 30;
  const Collected held = collect(*engine.submit(r));
  EXPECT_EQ(held.tokens, std::vector<int32_t>(30, 65));
  EXPECT_EQ(held.stop_cause, "degenerate_repetition");
}

TEST_F(EngineFixture, StopStringEndsGenerationAndIsNotReturned) {
  Engine engine(*backend, tokenizer, engine_options(4, 32));
  const Collected free_run = collect(*engine.submit(greedy_request({10, 20, 30}, 12)));
  ASSERT_GE(free_run.text.size(), 4u);
  // Stop on the text of generated tokens 3..4: the output must end right before it.
  const std::string stop = free_run.text.substr(2, 2);
  EngineRequest r = greedy_request({10, 20, 30}, 12);
  r.stop_strings = {stop};
  const Collected stopped = collect(*engine.submit(r));
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.text, free_run.text.substr(0, free_run.text.find(stop)));
}

TEST(StopMatcher, UnarmedPushPassesStopStringsThroughButKeepsAPossibleStart) {
  // vLLM's min_tokens: before it, a complete stop string is text; a stop string that ends in a
  // later (armed) delta still stops there, even when it began in an unarmed one.
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("a STOP b ST", false).text, "a STOP b ");
  const auto r = m.push("OP tail", true);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  StopMatcher n({"STOP"});
  EXPECT_EQ(n.push("STOP", false).text, "STOP");
  EXPECT_FALSE(n.push("x", true).stopped);  // the earlier match is not found again once armed
}

TEST(StopMatcher, HoldsBackPrefixesAcrossDeltas) {
  StopMatcher m({"</end>", "STOP"});
  EXPECT_EQ(m.push("hello </").text, "hello ");  // "</" may start "</end>"
  EXPECT_EQ(m.push("e").text, "");
  auto r = m.push("nd> tail");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(m.push("more").text, "");
  StopMatcher n({"STOP"});
  EXPECT_EQ(n.push("ST").text, "");
  EXPECT_EQ(n.push("x").text, "STx");  // no longer a prefix: released
  EXPECT_EQ(n.push("S").text, "");
  EXPECT_EQ(n.flush(), "S");  // end of generation releases the held prefix
}

}  // namespace
}  // namespace qs
