// Structured outputs in the engine: a request with a compiled grammar samples only tokens the
// grammar allows (masks computed on the mask workers between Backend::launch and wait), ends with
// "stop" only where the grammar may end, is batch-invariant, and survives preemption by recompute
// without replaying tokens into its matcher. Outputs are checked with std::regex (an independent
// matcher), never against our own earlier output.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>
#include <thread>

#include "constrained/grammar_compiler.h"
#include "constrained/token_vocabulary.h"
#include "engine/engine.h"
#include "support/engine_test_support.h"

namespace qs {
namespace {

constexpr int32_t kEos = 299;

struct EngineGrammarTest : EngineFixture {
  std::shared_ptr<constrained::GrammarCompiler> compiler = std::make_shared<constrained::GrammarCompiler>(
      constrained::TokenVocabulary::from_tokenizer(tokenizer, backend->vocab_rows(), {kEos}));

  EngineRequest request(const constrained::GrammarSource& source, std::vector<int32_t> prompt, int32_t max_tokens,
                        float temperature, uint64_t seed) {
    EngineRequest r = greedy_request(std::move(prompt), max_tokens);
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.stop_token_ids = {kEos};
    r.grammar = compiler->compile(source);
    return r;
  }
};

EngineOptions no_guard(int32_t seqs, int64_t tokens) {
  EngineOptions o = engine_options(seqs, tokens);
  o.guard.enabled = false;
  return o;
}

TEST_F(EngineGrammarTest, AMaskPastTheWorkLimitFailsOnlyItsRequest) {
  // "x", then a counted repeat of a negated class with overlapping alternatives (the grammar fuzz
  // target's slow input): the first mask is cheap, the second needs more parser work than the
  // limit. That request fails with kGrammar (a 400, or an error event on a stream) naming the
  // cause; the request beside it in the batch runs to its end.
  constrained::CompileLimits limits;
  limits.max_mask_steps = 50'000;
  constrained::GrammarCompiler small(compiler->vocab(), limits, 0);
  EngineRequest bad = greedy_request({1, 2, 3}, 16);
  bad.stop_token_ids = {kEos};
  bad.grammar = small.compile(constrained::GrammarSource::regex("x[^-az]{15}(-[,-]90)c+.(.o0)c+.(.om|org)"));
  Engine engine(*backend, tokenizer, no_guard(4, 64));
  auto other = engine.submit(greedy_request({4, 5, 6}, 16));
  auto failed = engine.submit(bad);
  const Collected f = collect(*failed);
  EXPECT_EQ(f.error_code, EngineErrorCode::kGrammar);
  EXPECT_NE(f.error.find("too ambiguous at output token 1"), std::string::npos) << f.error;
  EXPECT_EQ(f.text, "x");
  const Collected o = collect(*other);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.tokens.size(), 16u);
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineGrammarTest, AStatePastTheLiveParseLimitFailsOnlyItsRequest) {
  // "x", then a repeated group that can be empty: taking the "x" gives 22,984 live parses, past
  // the default limit of 10,000. The request fails with kGrammar at that token; the other runs on.
  EngineRequest bad = greedy_request({1, 2, 3}, 16);
  bad.stop_token_ids = {kEos};
  bad.grammar = compiler->compile(constrained::GrammarSource::regex("x([^-az]*){15}(-[,-]90)c+.(.o0)c+.(.om|org)"));
  Engine engine(*backend, tokenizer, no_guard(4, 64));
  auto other = engine.submit(greedy_request({4, 5, 6}, 16));
  auto failed = engine.submit(bad);
  const Collected f = collect(*failed);
  EXPECT_EQ(f.error_code, EngineErrorCode::kGrammar);
  EXPECT_NE(f.error.find("live parses"), std::string::npos) << f.error;
  const Collected o = collect(*other);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.tokens.size(), 16u);
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineGrammarTest, RegexOutputsMatchAndStopWhereTheGrammarEnds) {
  const std::string pattern = "(ab|c[de]){2,4}-[0-9]{1,3}";
  Engine engine(*backend, tokenizer, no_guard(8, 64));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 12; ++i) {
    streams.push_back(engine.submit(request(constrained::GrammarSource::regex(pattern), {1, 2, static_cast<int32_t>(3 + i)}, 64,
                                            i % 3 == 0 ? 0.0f : 1.5f, 100 + i)));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    const Collected c = collect(*streams[i]);
    EXPECT_EQ(c.error, "");
    ASSERT_EQ(c.finish_reason, "stop") << "request " << i << " text " << c.text;
    EXPECT_EQ(c.stop_cause, "stop_token");
    EXPECT_EQ(c.tokens.back(), kEos);
    EXPECT_TRUE(std::regex_match(c.text, std::regex(pattern))) << c.text;
  }
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineGrammarTest, ChoicesAndJsonSchemaOutputs) {
  Engine engine(*backend, tokenizer, no_guard(4, 64));
  const std::vector<std::string> options = {"red", "green", "blue violet"};
  for (int i = 0; i < 4; ++i) {
    const Collected c = collect(*engine.submit(
        request(constrained::GrammarSource::choices(options), {5, 6, static_cast<int32_t>(7 + i)}, 32, 1.0f, i)));
    ASSERT_EQ(c.finish_reason, "stop");
    EXPECT_NE(std::find(options.begin(), options.end(), c.text), options.end()) << c.text;
  }
  const std::string schema = R"({"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":99},
    "ok":{"type":"boolean"}},"required":["n","ok"],"additionalProperties":false})";
  const std::regex json_shape(R"(\{"n":(0|[1-9][0-9]?),"ok":(true|false)\})");
  for (int i = 0; i < 4; ++i) {
    const Collected c = collect(*engine.submit(
        request(constrained::GrammarSource::json_schema(schema), {9, static_cast<int32_t>(10 + i)}, 64, 1.0f, 50 + i)));
    ASSERT_EQ(c.finish_reason, "stop");
    EXPECT_TRUE(std::regex_match(c.text, json_shape)) << c.text;
  }
}

TEST_F(EngineGrammarTest, MaxTokensEndsWithLengthBeforeTheGrammarCompletes) {
  Engine engine(*backend, tokenizer, no_guard(4, 64));
  const Collected c = collect(*engine.submit(request(constrained::GrammarSource::regex("x{20}"), {1, 2}, 5, 0.0f, 0)));
  EXPECT_EQ(c.finish_reason, "length");
  EXPECT_EQ(c.text, "xxxxx");
}

// A constrained sequence's tokens do not depend on what else is in the batch, nor on being
// preempted and recomputed (the matcher is advanced once per sampled token, not on recompute).
TEST_F(EngineGrammarTest, BatchInvariantAndPreemptionSafe) {
  const std::string pattern = "[a-z ]{30,60}\\.";
  std::mt19937 rng(3);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> prompt(10 + 5 * i);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % 256);
    requests.push_back(request(constrained::GrammarSource::regex(pattern), prompt, 64, i % 2 ? 1.0f : 0.0f, 7 + i));
  }
  std::vector<Collected> solo;
  {
    Engine engine(*backend, tokenizer, no_guard(1, 32));
    for (const auto& r : requests) solo.push_back(collect(*engine.submit(r)));
  }
  auto small_backend = cpu_test_backend(model, KvDType::kF16, 12, 32, 256);  // forces preemption
  Engine engine(*small_backend, tokenizer, no_guard(8, 32));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : requests) streams.push_back(engine.submit(r));
  int64_t preempted = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Collected c = collect(*streams[i]);
    EXPECT_EQ(c.error, "");
    EXPECT_EQ(c.tokens, solo[i].tokens) << "request " << i;
    EXPECT_EQ(c.finish_reason, solo[i].finish_reason);
    if (c.finish_reason == "stop") EXPECT_TRUE(std::regex_match(c.text, std::regex(pattern))) << c.text;
    preempted += c.preemptions;
  }
  EXPECT_GT(preempted, 0) << "the KV budget must force preemption";
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

// /stats' mask wait (EngineStats::mask_*): every step that sampled a constrained token counts once,
// unconstrained steps never; with no mask worker threads the engine thread computes every mask
// itself after launch(), so each of those steps waits a positive time.
TEST_F(EngineGrammarTest, MaskWaitIsCountedPerConstrainedStep) {
  for (const int mask_threads : {0, 2}) {
    EngineOptions options = no_guard(2, 64);
    options.mask_threads = mask_threads;
    Engine engine(*backend, tokenizer, options);
    const Collected free_run = collect(*engine.submit(greedy_request({1, 2, 3}, 6)));
    ASSERT_EQ(free_run.tokens.size(), 6u);
    EngineStats st = settled_stats(engine);
    EXPECT_EQ(st.mask_steps_total, 0) << "unconstrained steps wait for no mask";
    EXPECT_EQ(st.mask_wait_seconds_total, 0.0);
    const Collected c = collect(*engine.submit(request(constrained::GrammarSource::regex("x{12}"), {4, 5}, 64, 0.0f, 0)));
    ASSERT_EQ(c.finish_reason, "stop") << c.text;
    const auto expected_steps = static_cast<int64_t>(c.tokens.size());  // one constrained step per sampled token
    for (int i = 0; i < 400 && st.mask_steps_total < expected_steps; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      st = engine.stats();
    }
    EXPECT_EQ(st.mask_steps_total, expected_steps) << "mask_threads " << mask_threads;
    EXPECT_GE(st.steps_total, 6 + expected_steps);
    if (mask_threads == 0) EXPECT_GT(st.mask_wait_seconds_total, 0.0);
    EXPECT_GE(st.mask_wait_seconds_total, 0.0);
    EXPECT_LE(st.mask_wait_max_seconds, st.mask_wait_seconds_total);
    EXPECT_GE(st.mask_wait_max_seconds * static_cast<double>(st.mask_steps_total), st.mask_wait_seconds_total);
  }
}

TEST_F(EngineGrammarTest, GrammarForAnotherVocabularyIsRejected) {
  Engine engine(*backend, tokenizer, no_guard(1, 32));
  constrained::GrammarCompiler other(constrained::TokenVocabulary::from_tokenizer(tokenizer, backend->vocab_rows() + 32, {kEos}));
  EngineRequest r = greedy_request({1, 2}, 4);
  r.grammar = other.compile(constrained::GrammarSource::regex("a+"));
  const SubmitResult result = engine.try_submit(std::move(r));
  EXPECT_EQ(result.rejection, EngineErrorCode::kInvalid);
}

}  // namespace
}  // namespace qs
