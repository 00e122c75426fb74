// Speculative decoding (n-gram prompt lookup) in the engine, on the in-memory random model: greedy
// and seeded sampled outputs are identical token for token with and without drafts (the verify
// rows use the RNG draws the one-token steps would: sampling/rejection_sampler.h), stop strings
// and max_tokens end a sequence at the right token inside accepted drafts, the prefix cache never
// serves the KV of rejected drafts, and grammar masks hold at every draft position. The reference
// is always the same request run without speculation.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "constrained/grammar_compiler.h"
#include "constrained/token_vocabulary.h"
#include "engine/engine.h"
#include "support/engine_test_support.h"

namespace qs {
namespace {

constexpr int32_t kA = 65;  // byte token "A"

EngineOptions options_with(int32_t seqs, int64_t tokens, bool spec, bool prefix_caching = true) {
  EngineOptions o = engine_options(seqs, tokens);
  o.guard.enabled = false;  // outputs of the random model loop: that is what drafts are for
  o.prefix_caching = prefix_caching;
  if (spec) o.spec = SpecDecodeOptions{3, 1, 4};
  return o;
}

std::vector<std::vector<int32_t>> random_prompts(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p(4 + (i * 5) % 30);
    for (auto& t : p) t = static_cast<int32_t>(rng() % 256);
    prompts.push_back(p);
  }
  return prompts;
}

// With a fixed k (--no-spec-adaptive) and with adaptive k (which changes how many drafts a step
// verifies, never the tokens).
TEST_F(EngineFixture, SpecGreedyOutputsAreIdenticalAndDraftsAreAccepted) {
  for (const bool adaptive : {false, true}) {
    SCOPED_TRACE(adaptive ? "adaptive k" : "fixed k");
    std::vector<EngineRequest> requests;
    for (const auto& p : random_prompts(12, adaptive ? 12 : 11)) requests.push_back(greedy_request(p, 48));
    std::vector<Collected> plain, spec;
    {
      Engine engine(*backend, tokenizer, options_with(8, 32, false));
      plain = run_all(engine, requests);
    }
    EngineOptions spec_options = options_with(8, 32, true);
    spec_options.spec.adaptive = adaptive;
    Engine engine(*backend, tokenizer, spec_options);
    spec = run_all(engine, requests);
    int64_t drafts = 0, accepted = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(spec[i].error, "");
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
      EXPECT_EQ(spec[i].text, plain[i].text) << "request " << i;
      EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << "request " << i;
      EXPECT_EQ(plain[i].spec_draft_tokens, 0);
      drafts += spec[i].spec_draft_tokens;
      accepted += spec[i].spec_accepted_tokens;
    }
    const EngineStats st = settled_stats(engine);
    EXPECT_EQ(st.spec_draft_tokens_total, drafts);
    EXPECT_EQ(st.spec_accepted_tokens_total, accepted);
    EXPECT_GT(accepted, 0) << "no draft accepted: the test does not exercise verification";
    EXPECT_LE(accepted, drafts);
    EXPECT_EQ(st.kv_blocks_referenced, 0);
  }
}

TEST_F(EngineFixture, SpecSeededSampledOutputsAreIdentical) {
  std::vector<EngineRequest> requests;
  int i = 0;
  for (const auto& p : random_prompts(8, 5)) {
    EngineRequest r = greedy_request(p, 40);
    r.sampling.temperature = 1.0f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 1000 + i++;
    // Most of the mass on two tokens, so that sampled outputs repeat and drafts get accepted.
    r.sampling.logit_bias = {{kA, 6.0f}, {kA + 1, 6.0f}};
    requests.push_back(r);
  }
  std::vector<Collected> plain, spec;
  {
    Engine engine(*backend, tokenizer, options_with(8, 32, false));
    plain = run_all(engine, requests);
  }
  Engine engine(*backend, tokenizer, options_with(8, 32, true));
  spec = run_all(engine, requests);
  int64_t accepted = 0, drafts = 0;
  for (size_t k = 0; k < requests.size(); ++k) {
    EXPECT_EQ(spec[k].tokens, plain[k].tokens) << "request " << k;
    accepted += spec[k].spec_accepted_tokens;
    drafts += spec[k].spec_draft_tokens;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafts);  // sampled: some drafts are rejected too
}

// With a +100 bias on "A" every output token is "A" and every draft (from the "AAAA" prompt) is
// accepted: the first token comes from the prefill, then each step verifies 4 drafts.
EngineRequest all_a_request(int32_t max_tokens) {
  EngineRequest r = greedy_request({kA, kA, kA, kA}, max_tokens);
  r.sampling.logit_bias = {{kA, 100.0f}};
  return r;
}

TEST_F(EngineFixture, SpecStopStringEndsAtTheAcceptedDraftThatCompletesIt) {
  EngineRequest r = all_a_request(40);
  r.stop_strings = {"AAAAAAA"};  // the 7th token: the first draft of the second verify step
  Engine engine(*backend, tokenizer, options_with(4, 32, true));
  const Collected c = collect(*engine.submit(r));
  EXPECT_EQ(c.finish_reason, "stop");
  EXPECT_EQ(c.stop_cause, "stop_string");
  EXPECT_EQ(c.tokens, std::vector<int32_t>(7, kA));
  EXPECT_EQ(c.text, "");  // the stop string is not returned
  // Step 2: 4 drafts, all accepted (+1 bonus: 6 tokens); step 3: 4 drafts, all accepted by the
  // rejection step, but the first completes the stop string and the output ends there.
  EXPECT_EQ(c.spec_draft_tokens, 8);
  EXPECT_EQ(c.spec_accepted_tokens, 8);
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineFixture, SpecMaxTokensIsNeverExceeded) {
  Engine engine(*backend, tokenizer, options_with(4, 32, true));
  for (int32_t max_tokens : {1, 2, 6, 8, 13}) {
    const Collected c = collect(*engine.submit(all_a_request(max_tokens)));
    EXPECT_EQ(c.finish_reason, "length") << max_tokens;
    EXPECT_EQ(c.tokens, std::vector<int32_t>(static_cast<size_t>(max_tokens), kA));
    EXPECT_EQ(c.spec_accepted_tokens, c.spec_draft_tokens) << max_tokens;  // every draft accepted
    // First token from the prefill, then steps of up to 5 tokens, drafts capped by max_tokens.
    EXPECT_EQ(c.spec_draft_tokens, max_tokens > 1 ? max_tokens - 1 - (max_tokens - 1 + 4) / 5 : 0) << max_tokens;
  }
}

TEST_F(EngineFixture, SpecStopTokenInsideDraftsEndsTheSequenceThere) {
  // Greedy outputs of the random model; a stop id chosen from the plain output's tokens must end
  // the speculative run at the same token.
  std::vector<Collected> plain;
  std::vector<EngineRequest> requests;
  for (const auto& p : random_prompts(6, 23)) requests.push_back(greedy_request(p, 40));
  {
    Engine engine(*backend, tokenizer, options_with(8, 32, false));
    plain = run_all(engine, requests);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_GE(plain[i].tokens.size(), 20u);
    requests[i].stop_token_ids = {plain[i].tokens[15]};  // its first occurrence ends the output
  }
  {
    Engine engine(*backend, tokenizer, options_with(8, 32, false));
    plain = run_all(engine, requests);
  }
  Engine engine(*backend, tokenizer, options_with(8, 32, true));
  const std::vector<Collected> spec = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_EQ(spec[i].finish_reason, "stop") << "request " << i;
    EXPECT_EQ(spec[i].stop_cause, "stop_token") << "request " << i;
  }
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineFixture, SpecMinTokensHoldsAtEveryDraftPosition) {
  // A stop id taken from the plain output's early tokens, with min_tokens past its first
  // occurrences: the verify rows suppress it at the draft positions below min_tokens exactly as
  // one-token steps do, so the outputs are identical.
  std::vector<Collected> plain;
  std::vector<EngineRequest> requests;
  for (const auto& p : random_prompts(6, 29)) requests.push_back(greedy_request(p, 40));
  {
    Engine engine(*backend, tokenizer, options_with(8, 32, false));
    plain = run_all(engine, requests);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_GE(plain[i].tokens.size(), 12u);
    requests[i].stop_token_ids = {plain[i].tokens[2]};
    requests[i].min_tokens = 10;
  }
  {
    Engine engine(*backend, tokenizer, options_with(8, 32, false));
    plain = run_all(engine, requests);
  }
  Engine engine(*backend, tokenizer, options_with(8, 32, true));
  const std::vector<Collected> spec = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_GE(plain[i].tokens.size(), 11u) << "request " << i;
    for (size_t j = 0; j < 10 && j < plain[i].tokens.size(); ++j) EXPECT_NE(plain[i].tokens[j], requests[i].stop_token_ids[0]);
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << "request " << i;
  }
  EXPECT_EQ(settled_stats(engine).kv_blocks_referenced, 0);
}

TEST_F(EngineFixture, SpecPrefixCacheServesOnlyAcceptedTokens) {
  // A: speculative, its full blocks enter the prefix cache. B's prompt is A's prompt + output:
  // on the same engine it reuses those blocks, and its output must equal B's output on a fresh
  // engine without prefix caching or speculation.
  const std::vector<int32_t> prompt_a = random_prompts(3, 77)[2];
  Engine engine(*backend, tokenizer, options_with(4, 32, true));
  const Collected a = collect(*engine.submit(greedy_request(prompt_a, 60)));
  ASSERT_GT(a.spec_accepted_tokens, 0);
  ASSERT_LT(a.spec_accepted_tokens, a.spec_draft_tokens) << "no rejected draft: nothing to pollute the cache";
  std::vector<int32_t> prompt_b = prompt_a;
  prompt_b.insert(prompt_b.end(), a.tokens.begin(), a.tokens.end() - 1);
  const Collected b = collect(*engine.submit(greedy_request(prompt_b, 20)));
  EXPECT_GE(b.cached_tokens, 48);
  Engine fresh(*backend, tokenizer, options_with(4, 32, false, false));
  // Note: `fresh` shares the backend's KV storage; `engine` is idle (no step runs concurrently).
  const Collected reference = collect(*fresh.submit(greedy_request(prompt_b, 20)));
  EXPECT_EQ(reference.cached_tokens, 0);
  EXPECT_EQ(b.tokens, reference.tokens);
}

struct EngineSpecGrammarTest : EngineFixture {
  std::shared_ptr<constrained::GrammarCompiler> compiler = std::make_shared<constrained::GrammarCompiler>(
      constrained::TokenVocabulary::from_tokenizer(tokenizer, backend->vocab_rows(), {299}));
};

TEST_F(EngineSpecGrammarTest, DraftPositionsAreMaskedByTheStateTheyReach) {
  // The grammar forces "abc" repeats (only the count is free): drafts from the n-gram lookup are
  // accepted where the grammar allows them, rejected where it does not, and every output matches.
  const std::string pattern = "x(abc){3,6}y[0-9]{2}";
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 6; ++i) {
    EngineRequest r = greedy_request({'a', 'b', 'c', 'a', 'b', 'c', static_cast<int32_t>(40 + i)}, 40);
    r.sampling.temperature = i % 2 == 0 ? 0.0f : 1.0f;
    r.sampling.seed = 7 + i;
    r.stop_token_ids = {299};
    r.grammar = compiler->compile(constrained::GrammarSource::regex(pattern));
    requests.push_back(r);
  }
  std::vector<Collected> plain;
  {
    Engine engine(*backend, tokenizer, options_with(8, 64, false));
    plain = run_all(engine, requests);
  }
  Engine engine(*backend, tokenizer, options_with(8, 64, true));
  const std::vector<Collected> spec = run_all(engine, requests);
  int64_t accepted = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(spec[i].error, "") << "request " << i;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_TRUE(std::regex_match(spec[i].text, std::regex(pattern))) << spec[i].text;
    accepted += spec[i].spec_accepted_tokens;
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace qs
