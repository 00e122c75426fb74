// Serving behaviour of the engine on the in-memory random model: preemption by recompute, the
// prefix cache, KV accounting after many mixed requests, queue limits, timeouts and the
// degenerate-output guard. Every expected value comes from an independent reference: the same
// requests run alone or on an unconstrained engine, or a counting rule stated in the test.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "support/engine_test_support.h"
#include "support/gated_backend.h"

namespace qs {
namespace {

std::vector<int32_t> random_prompt(std::mt19937& rng, size_t n) {
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(rng() % 256);
  return p;
}

// Several sequences whose prompts + outputs need far more KV than the cache holds: the newest
// running ones are preempted and recomputed, and every output equals the unconstrained run.
TEST_F(EngineFixture, PreemptionKeepsGreedyOutputsIdentical) {
  std::mt19937 rng(11);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(greedy_request(random_prompt(rng, 10 + 5 * i), 40));
  std::vector<Collected> reference;
  {
    Engine engine(*backend, tokenizer, engine_options(8, 32));  // 128 blocks: no preemption
    reference = run_all(engine, requests);
    EXPECT_EQ(settled_stats(engine).preemptions_total, 0);
  }
  for (bool prefix_caching : {true, false}) {
    auto small_backend = cpu_test_backend(model, KvDType::kF16, 12, 32, 256);  // 192 tokens; the 8 sequences need ~50 blocks
    EngineOptions options = engine_options(8, 32);
    options.prefix_caching = prefix_caching;
    // All 8 requests are queued before the first step (GatedBackend): submitted while the engine
    // runs, early ones could finish before later ones arrive on a loaded machine, and nothing
    // would need preempting.
    GatedBackend gated(*small_backend);
    Engine engine(gated, tokenizer, options);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : requests) streams.push_back(engine.submit(r));
    gated.open();
    std::vector<Collected> constrained;
    for (auto& stream : streams) constrained.push_back(collect(*stream));
    int64_t preempted = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(constrained[i].error, "") << "request " << i;
      EXPECT_EQ(constrained[i].tokens, reference[i].tokens) << "request " << i << " prefix cache " << prefix_caching;
      EXPECT_EQ(constrained[i].finish_reason, reference[i].finish_reason);
      preempted += constrained[i].preemptions;
    }
    const EngineStats st = settled_stats(engine);
    EXPECT_GT(st.preemptions_total, 0) << "the KV budget must force preemption";
    EXPECT_EQ(st.preemptions_total, preempted);
    EXPECT_EQ(st.kv_blocks_referenced, 0);
  }
}

// Turn 2 of a conversation (turn 1's prompt + answer + a new message) reuses every full block
// turn 1 computed and prefills only the rest; its output equals a cache-less run.
TEST_F(EngineFixture, PrefixCacheSecondTurnComputesOnlyNewTokens) {
  std::mt19937 rng(5);
  const std::vector<int32_t> turn1 = random_prompt(rng, 45);
  Engine engine(*backend, tokenizer, engine_options(4, 32));
  const Collected first = collect(*engine.submit(greedy_request(turn1, 10)));
  ASSERT_EQ(first.tokens.size(), 10u);
  EXPECT_EQ(first.cached_tokens, 0);
  EXPECT_EQ(first.prefill_computed_tokens, 45);

  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int32_t> user = random_prompt(rng, 7);
  turn2.insert(turn2.end(), user.begin(), user.end());
  const Collected second = collect(*engine.submit(greedy_request(turn2, 10)));

  // Counting rule: turn 1 computed the KV of its prompt and of every generated token but the last
  // (45 + 10 - 1 = 54 tokens, 3 full blocks); turn 2 may reuse at most floor((62 - 1) / 16) blocks.
  const int64_t computed1 = 45 + 10 - 1;
  const int64_t expected_cached = std::min<int64_t>(computed1 / 16, (static_cast<int64_t>(turn2.size()) - 1) / 16) * 16;
  EXPECT_GE(second.cached_tokens, 45 / 16 * 16) << "at least turn 1's prompt, in whole blocks";
  EXPECT_EQ(second.cached_tokens, expected_cached);
  EXPECT_EQ(second.prefill_computed_tokens, static_cast<int64_t>(turn2.size()) - second.cached_tokens);

  auto fresh_backend = cpu_test_backend(model, KvDType::kF16, 128, 32, 256);
  EngineOptions no_cache = engine_options(4, 32);
  no_cache.prefix_caching = false;
  Engine reference(*fresh_backend, tokenizer, no_cache);
  const Collected ref = collect(*reference.submit(greedy_request(turn2, 10)));
  EXPECT_EQ(ref.cached_tokens, 0);
  EXPECT_EQ(ref.prefill_computed_tokens, static_cast<int64_t>(turn2.size()));
  EXPECT_EQ(second.tokens, ref.tokens);

  const EngineStats st = settled_stats(engine);
  EXPECT_EQ(st.prefix_cache_queries_tokens, 45 + static_cast<int64_t>(turn2.size()));
  EXPECT_EQ(st.prefix_cache_hits_tokens, expected_cached);
  EXPECT_EQ(st.kv_blocks_referenced, 0);
  EXPECT_EQ(st.kv_blocks_cached, computed1 / 16 + (static_cast<int64_t>(turn2.size()) + 10 - 1) / 16 - expected_cached / 16);
}

// 500 requests: plain, sharing prefixes, cancelled mid-stream, timed out, on a KV cache small
// enough to force preemptions. Afterwards no block is referenced and nothing runs or waits.
TEST_F(EngineFixture, NoLeakAfter500MixedRequests) {
  auto small_backend = cpu_test_backend(model, KvDType::kF16, 24, 32, 256);
  EngineOptions options = engine_options(8, 32);
  options.guard.enabled = false;  // the final request must run to max_tokens
  // Chunks of the full 32-token budget whatever the measured step times: admissions then outpace
  // completions and preemption is certain, not a matter of timing.
  options.prefill_slack = 0;
  Engine engine(*small_backend, tokenizer, options);
  std::mt19937 rng(3);
  const std::vector<int32_t> shared = random_prompt(rng, 40);
  int n_cancelled = 0, n_timed_out = 0, n_finished = 0;
  for (int wave = 0; wave < 10; ++wave) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    std::vector<int> kinds;
    for (int i = 0; i < 50; ++i) {
      const int kind = static_cast<int>(rng() % 4);  // 0 plain, 1 shared prefix, 2 cancel, 3 timeout
      std::vector<int32_t> prompt = random_prompt(rng, 5 + rng() % 60);
      if (kind == 1) prompt.insert(prompt.begin(), shared.begin(), shared.end());
      EngineRequest r = greedy_request(prompt, static_cast<int32_t>(4 + rng() % 40));
      if (kind == 3) r.timeout_s = 0.001 * static_cast<double>(rng() % 20);
      if (kind == 3 && r.timeout_s == 0) r.timeout_s = 1e-6;
      streams.push_back(engine.submit(r));
      kinds.push_back(kind);
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      if (kinds[i] == 2) {
        EngineEvent e;
        streams[i]->pop(e, std::chrono::milliseconds(30000));
        streams[i]->cancel();
      }
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      const Collected c = collect(*streams[i]);
      ASSERT_TRUE(c.ended) << "request " << i << " of wave " << wave << " got no final event";
      if (c.finish_reason == "cancelled") ++n_cancelled;
      if (c.error_code == EngineErrorCode::kTimeout) ++n_timed_out;
      if (c.finish_reason == "length" || c.finish_reason == "stop") ++n_finished;
      if (kinds[i] != 3) { EXPECT_NE(c.error_code, EngineErrorCode::kTimeout); }
      if (kinds[i] < 2) { EXPECT_TRUE(c.finish_reason == "length" || c.finish_reason == "stop") << c.error; }
    }
  }
  EXPECT_EQ(n_finished + n_cancelled + n_timed_out, 500);
  EXPECT_GT(n_cancelled, 0);
  EXPECT_GT(n_timed_out, 0);
  const EngineStats st = settled_stats(engine);
  EXPECT_GT(st.preemptions_total, 0);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.kv_blocks_referenced, 0);
  EXPECT_LE(st.kv_blocks_cached, st.kv_blocks_total);
  // Every block can be handed out again: three sequences of 8 blocks each run to the end together
  // without a single preemption.
  std::vector<EngineRequest> fill;
  for (int i = 0; i < 3; ++i) fill.push_back(greedy_request(random_prompt(rng, 100), 28));  // 128 tokens
  const std::vector<Collected> filled = run_all(engine, fill);
  for (const auto& c : filled) {
    EXPECT_EQ(c.error, "");
    EXPECT_EQ(c.tokens.size(), 28u);
  }
  EXPECT_EQ(settled_stats(engine).preemptions_total, st.preemptions_total);
}

TEST_F(EngineFixture, QueueLimitRejectsImmediatelyWithoutDisturbingAdmitted) {
  EngineOptions options = engine_options(1, 32);
  options.max_queue = 2;
  options.guard.enabled = false;
  Engine engine(*backend, tokenizer, options);
  std::vector<std::shared_ptr<RequestStream>> accepted;
  int rejected = 0;
  for (int i = 0; i < 10; ++i) {
    const auto start = SteadyClock::now();
    SubmitResult r = engine.try_submit(greedy_request({1, 2, static_cast<int32_t>(i)}, 200));
    EXPECT_LT(SteadyClock::now() - start, std::chrono::milliseconds(50));
    if (r.stream) {
      accepted.push_back(r.stream);
    } else {
      EXPECT_EQ(r.rejection, EngineErrorCode::kQueueFull);
      ++rejected;
    }
  }
  // One may run and two may wait; a step takes far longer than this loop, so at most a couple
  // more slip in as the first is admitted.
  EXPECT_GE(rejected, 5);
  for (auto& s : accepted) {
    const Collected c = collect(*s);
    EXPECT_EQ(c.error, "");
    EXPECT_TRUE(c.tokens.size() == 200 || c.finish_reason == "stop");
  }
}

// A generation cut by shutdown() ends with an error (kAborted, the 503 a client retries), not a
// finish: a partial reply must not look like a whole one. Its tokens so far are still counted.
TEST_F(EngineFixture, ShutdownEndsRunningGenerationsWithAbortedError) {
  EngineOptions options = engine_options(1, 32);
  options.guard.enabled = false;
  Engine engine(*backend, tokenizer, options);
  std::shared_ptr<RequestStream> running = engine.submit(greedy_request({1, 2, 3}, 240));
  std::shared_ptr<RequestStream> waiting = engine.submit(greedy_request({4, 5, 6}, 10));
  EngineEvent event;
  int64_t streamed = 0;
  while (streamed < 3 && running->pop(event, std::chrono::seconds(10))) {
    ASSERT_EQ(event.kind, EngineEvent::Kind::kDelta) << event.error;
    streamed += static_cast<int64_t>(event.token_ids.size());
  }
  ASSERT_GE(streamed, 3);
  engine.shutdown();
  const Collected c = collect(*running);
  EXPECT_TRUE(c.ended);
  EXPECT_EQ(c.error_code, EngineErrorCode::kAborted) << c.error;
  EXPECT_NE(c.error.find("shut down"), std::string::npos) << c.error;
  EXPECT_EQ(c.finish_reason, "");
  const Collected w = collect(*waiting);
  EXPECT_TRUE(w.ended);
  EXPECT_EQ(w.error_code, EngineErrorCode::kAborted) << w.error;
}

TEST_F(EngineFixture, QueueSlotsAreReservedBeforeSubmissionAndReleasedWhenUnused) {
  EngineOptions options = engine_options(1, 32);
  options.max_queue = 2;
  Engine engine(*backend, tokenizer, options);
  {
    QueueSlot a = engine.reserve_queue_slot();
    QueueSlot b = engine.reserve_queue_slot();
    EXPECT_TRUE(a && b);
    EXPECT_FALSE(engine.reserve_queue_slot());  // both places taken while requests are prepared
    EXPECT_EQ(engine.stats().waiting, 2);
    EXPECT_EQ(engine.try_submit(greedy_request({1, 2}, 4)).rejection, EngineErrorCode::kQueueFull);
    SubmitResult r = engine.try_submit(greedy_request({1, 2}, 4), &a);  // a becomes its place
    ASSERT_NE(r.stream, nullptr);
    EXPECT_FALSE(a);
    EXPECT_EQ(collect(*r.stream).tokens.size(), 4u);
  }  // b released unused
  const EngineStats st = settled_stats(engine);
  EXPECT_EQ(st.waiting, 0);
  EXPECT_EQ(st.in_flight, 0);
  EXPECT_TRUE(engine.reserve_queue_slot());
}

TEST_F(EngineFixture, QueueWaitLimitEndsRequestsThatCannotStart) {
  EngineOptions options = engine_options(1, 32);
  // 1 ms: far shorter than the 240 decode steps of `running` (each a full forward pass).
  options.max_queue_wait_s = 0.001;
  options.guard.enabled = false;
  // Both requests are queued before the first forward pass ends (GatedBackend): submitted while
  // the engine runs, `queued` could otherwise arrive after a descheduled test thread let all 240
  // steps of `running` finish, and would then rightly start at once.
  GatedBackend gated(*backend);
  Engine engine(gated, tokenizer, options);
  auto running = engine.submit(greedy_request({1, 2, 3}, 240));
  auto queued = engine.submit(greedy_request({4, 5, 6}, 4));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past max_queue_wait_s before the 2nd step
  gated.open();
  EngineEvent e;
  ASSERT_TRUE(running->pop(e, std::chrono::milliseconds(30000)));
  ASSERT_EQ(e.kind, EngineEvent::Kind::kDelta) << e.error;  // the admission event, not an end
  EXPECT_GE(e.queue_ms, 0);
  const Collected q = collect(*queued);
  const Collected r = collect(*running);
  EXPECT_EQ(q.error_code, EngineErrorCode::kQueueTimeout) << q.error << " " << q.finish_reason;
  EXPECT_TRUE(r.ended);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.tokens.size(), 240u);
}

// A request is judged against max_queue_wait_s only once the scheduler could not admit it: one
// that reaches a free engine late (the server stamps `arrival` when the HTTP request comes in,
// before tokenization and grammar compilation; on a busy host the engine thread may also wake up
// late) starts instead of failing as "server overloaded". Deterministic: the arrival lies 1 s
// in the past, so a check before the first schedule() fails it every time.
TEST_F(EngineFixture, QueueWaitLimitNeverEndsARequestThatCanStartNow) {
  EngineOptions options = engine_options(1, 32);
  options.max_queue_wait_s = 0.05;
  options.guard.enabled = false;
  Engine engine(*backend, tokenizer, options);
  EngineRequest late = greedy_request({4, 5, 6}, 4);
  late.arrival = SteadyClock::now() - std::chrono::seconds(1);
  auto stream = engine.submit(late);
  EngineEvent e;
  ASSERT_TRUE(stream->pop(e, std::chrono::milliseconds(30000)));
  ASSERT_EQ(e.kind, EngineEvent::Kind::kDelta) << e.error;  // admitted, not turned away
  EXPECT_GE(e.queue_ms, 1000.0);
  const Collected c = collect(*stream);
  EXPECT_EQ(c.error_code, EngineErrorCode::kNone) << c.error;
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(c.tokens.size(), 4u);
  const EngineStats st = settled_stats(engine);
  EXPECT_EQ(st.in_flight, 0);
  EXPECT_EQ(st.waiting, 0);
}

TEST_F(EngineFixture, TimeoutEndsAGenerationWithAnError) {
  Engine engine(*backend, tokenizer, engine_options(4, 32));
  EngineRequest r = greedy_request({7, 8, 9}, 200);
  r.timeout_s = 1e-6;
  const Collected c = collect(*engine.submit(r));
  EXPECT_EQ(c.error_code, EngineErrorCode::kTimeout);
  EXPECT_NE(c.error.find("timed out"), std::string::npos) << c.error;
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineFixture, DegenerateGuardStopsAForcedRepetitionWithLength) {
  EngineRequest r = greedy_request({7, 8, 9}, 200);
  r.sampling.logit_bias = {{'x', 100.0f}};  // the same token every step
  {
    Engine engine(*backend, tokenizer, engine_options(4, 32));
    const Collected c = collect(*engine.submit(r));
    EXPECT_EQ(c.finish_reason, "length");
    EXPECT_EQ(c.stop_cause, "degenerate_repetition");
    EXPECT_EQ(c.tokens.size(), static_cast<size_t>(OutputGuardOptions{}.ngram_repeats));
  }

  EngineOptions blank_only = engine_options(4, 32);
  blank_only.guard.ngram_repeats = 0;
  Engine engine2(*backend, tokenizer, blank_only);
  r.sampling.logit_bias = {{'\n', 100.0f}};
  const Collected b = collect(*engine2.submit(r));
  EXPECT_EQ(b.finish_reason, "length");
  EXPECT_EQ(b.stop_cause, "degenerate_blank_run");
  EXPECT_EQ(b.tokens.size(), static_cast<size_t>(OutputGuardOptions{}.max_blank_run + 1));
}

}  // namespace
}  // namespace qs
