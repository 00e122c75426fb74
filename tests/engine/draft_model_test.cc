// Speculative decoding with a draft model (engine/draft_model_proposer.h) on in-memory random
// models: the proposer's drafts are the draft model's own greedy continuation (reference: the
// draft model run alone through Generator), it rolls its KV back to the accepted tokens and frees
// it; `generate`'s path and the serving engine give token-for-token the same greedy output with
// and without a draft model, whether the draft is the target itself (acceptance ~100%) or another
// random model (low acceptance); speculation asked without a draft backend is refused. Sampled
// requests draw their drafts from q and keep only the target's distribution, not its tokens
// (tests/engine/spec_sampling_test.cc); here they must be reproducible.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "engine/draft_model_proposer.h"
#include "engine/generator.h"
#include "support/engine_test_support.h"

namespace qs {
namespace {

constexpr uint32_t kOtherSeed = 98765;

std::vector<int32_t> random_prompt(std::mt19937& rng, size_t n) {
  std::vector<int32_t> p(n);
  for (auto& t : p) t = static_cast<int32_t>(rng() % 256);
  return p;
}

// The draft model's greedy continuation of `prompt`, `n` tokens, run alone (no speculation).
std::vector<int32_t> greedy_continuation(Backend& backend, const std::vector<int32_t>& prompt, int32_t n) {
  GenerationOptions options;
  options.max_tokens = n;
  options.sampling.temperature = 0;
  return Generator(backend).run(prompt, options, [](int32_t) {}).output_ids;
}

double rate(int64_t accepted, int64_t drafts) { return drafts > 0 ? static_cast<double>(accepted) / static_cast<double>(drafts) : 0.0; }

struct DraftModelTest : EngineFixture {
  RandomModel other{Architecture::kQwen3, DType::F32, kOtherSeed};
  std::unique_ptr<Backend> self_draft = cpu_test_backend(model, KvDType::kF16, 128);
  std::unique_ptr<Backend> other_draft = cpu_test_backend(other, KvDType::kF16, 128);
  std::unique_ptr<Backend> reference = cpu_test_backend(other, KvDType::kF16, 64);
};

TEST_F(DraftModelTest, ProposesTheDraftModelsGreedyContinuationAndRollsBack) {
  DraftModelProposer proposer(*other_draft);
  const int32_t all_blocks = proposer.free_kv_blocks();
  std::mt19937 rng(7);
  const std::vector<int32_t> a = random_prompt(rng, 40);  // more than one KV block
  const std::vector<int32_t> b = random_prompt(rng, 9);
  std::vector<int32_t> out_a, out_b;
  std::vector<DraftRequest> asks = {{1, a, 5, &out_a}, {2, b, 3, &out_b}};
  proposer.propose(asks);
  const std::vector<int32_t> cont_a = greedy_continuation(*reference, a, 8);
  const std::vector<int32_t> cont_b = greedy_continuation(*reference, b, 8);
  EXPECT_EQ(out_a, std::vector<int32_t>(cont_a.begin(), cont_a.begin() + 5));
  EXPECT_EQ(out_b, std::vector<int32_t>(cont_b.begin(), cont_b.begin() + 3));
  EXPECT_EQ(proposer.cached_tokens(1), 40 + 4);  // the prompt and drafts 0..3 (the 5th not computed)
  EXPECT_EQ(proposer.cached_tokens(2), 9 + 2);

  // The target accepted drafts 0..1 of `a` and then sampled a token other than draft 2: the draft
  // KV keeps the common prefix (prompt + 2 drafts) and continues from the new token.
  std::vector<int32_t> a2 = a;
  a2.insert(a2.end(), cont_a.begin(), cont_a.begin() + 2);
  a2.push_back((cont_a[2] + 1) % 256);
  std::vector<DraftRequest> again = {{1, a2, 4, &out_a}};
  proposer.propose(again);
  const std::vector<int32_t> cont_a2 = greedy_continuation(*reference, a2, 4);
  EXPECT_EQ(out_a, cont_a2);
  EXPECT_EQ(proposer.last_steps(), 4);  // 1 catch-up chunk (the new token) + 3 draft steps
  EXPECT_EQ(proposer.cached_tokens(1), static_cast<int64_t>(a2.size()) + 3);

  proposer.release(1);
  proposer.release(2);
  EXPECT_EQ(proposer.cached_tokens(1), 0);
  EXPECT_EQ(proposer.free_kv_blocks(), all_blocks);
}

TEST_F(DraftModelTest, ProposesNothingWhenItsKvCacheIsFull) {
  const std::unique_ptr<Backend> small = cpu_test_backend(other, KvDType::kF16, 2);  // 32 tokens
  DraftModelProposer proposer(*small);
  std::mt19937 rng(3);
  const std::vector<int32_t> long_prompt = random_prompt(rng, 40);
  const std::vector<int32_t> short_prompt = random_prompt(rng, 6);
  std::vector<int32_t> out_long, out_short;
  std::vector<DraftRequest> asks = {{1, long_prompt, 4, &out_long}, {2, short_prompt, 4, &out_short}};
  proposer.propose(asks);
  EXPECT_TRUE(out_long.empty());
  EXPECT_EQ(out_short, std::vector<int32_t>(greedy_continuation(*reference, short_prompt, 4)));
  EXPECT_EQ(proposer.cached_tokens(1), 0);
  proposer.release(2);
  EXPECT_EQ(proposer.free_kv_blocks(), 2);
}

GenerationResult generate(Backend& target, Backend* draft, const std::vector<int32_t>& prompt, float temperature,
                          uint64_t seed) {
  GenerationOptions options;
  options.max_tokens = 40;
  options.sampling.temperature = temperature;
  options.sampling.seed = seed;
  options.stop_token_ids = {299};
  if (draft != nullptr) options.spec = SpecDecodeOptions{0, 1, 4, true};
  return Generator(target, draft).run(prompt, options, [](int32_t) {});
}

TEST_F(DraftModelTest, GeneratorOutputIsIdenticalWithSelfAndOtherDrafts) {
  std::mt19937 rng(11);
  int64_t self_drafts = 0, self_accepted = 0, other_drafts = 0, other_accepted = 0;
  for (int i = 0; i < 4; ++i) {
    const std::vector<int32_t> prompt = random_prompt(rng, 5 + 7 * i);
    const float temperature = i % 2 == 0 ? 0.0f : 0.9f;  // greedy, and seeded sampling
    const GenerationResult plain = generate(*backend, nullptr, prompt, temperature, 40 + i);
    const GenerationResult self = generate(*backend, self_draft.get(), prompt, temperature, 40 + i);
    const GenerationResult poor = generate(*backend, other_draft.get(), prompt, temperature, 40 + i);
    if (i % 2 == 0) {  // greedy: the target's tokens
      EXPECT_EQ(self.output_ids, plain.output_ids) << "prompt " << i;
      EXPECT_EQ(poor.output_ids, plain.output_ids) << "prompt " << i;
      EXPECT_EQ(self.finish_reason, plain.finish_reason);
      EXPECT_EQ(poor.finish_reason, plain.finish_reason);
    } else {  // sampled drafts: the target's distribution, the same tokens for the same seed
      EXPECT_EQ(generate(*backend, self_draft.get(), prompt, temperature, 40 + i).output_ids, self.output_ids);
      EXPECT_EQ(generate(*backend, other_draft.get(), prompt, temperature, 40 + i).output_ids, poor.output_ids);
    }
    if (i % 2 == 0) {  // acceptance rates of greedy drafts (sampled ones: spec_sampling_test.cc)
      self_drafts += self.spec_draft_tokens;
      self_accepted += self.spec_accepted_tokens;
      other_drafts += poor.spec_draft_tokens;
      other_accepted += poor.spec_accepted_tokens;
    }
    EXPECT_GT(self.spec_propose_steps, 0);
  }
  EXPECT_GT(self_drafts, 20);
  EXPECT_GE(rate(self_accepted, self_drafts), 0.95) << self_accepted << "/" << self_drafts;
  EXPECT_GT(other_drafts, 20);
  EXPECT_LE(rate(other_accepted, other_drafts), 0.5) << other_accepted << "/" << other_drafts;
}

EngineOptions draft_options(bool draft) {
  EngineOptions o = engine_options(6, 32);
  o.guard.enabled = false;
  if (draft) o.spec = SpecDecodeOptions{0, 1, 3, true};
  return o;
}

TEST_F(DraftModelTest, EngineOutputIsIdenticalWithSelfAndOtherDrafts) {
  std::mt19937 rng(5);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(greedy_request(random_prompt(rng, 4 + 5 * i), 30));
  std::vector<Collected> plain;
  {
    Engine engine(*backend, tokenizer, draft_options(false));
    plain = run_all(engine, requests);
  }
  for (Backend* draft : {self_draft.get(), other_draft.get()}) {
    Engine engine(*backend, tokenizer, draft_options(true), draft);
    const std::vector<Collected> spec = run_all(engine, requests);
    int64_t drafts = 0, accepted = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(spec[i].error, "");
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
      EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << "request " << i;
      drafts += spec[i].spec_draft_tokens;
      accepted += spec[i].spec_accepted_tokens;
    }
    const EngineStats st = settled_stats(engine);
    EXPECT_EQ(st.spec_draft_tokens_total, drafts);
    EXPECT_EQ(st.spec_accepted_tokens_total, accepted);
    EXPECT_GT(st.spec_propose_steps_total, 0);
    EXPECT_GT(st.spec_propose_seconds_total, 0.0);
    EXPECT_EQ(st.kv_blocks_referenced, 0);
    EXPECT_GT(drafts, 40);
    if (draft == self_draft.get()) {
      EXPECT_GE(rate(accepted, drafts), 0.95) << accepted << "/" << drafts;
    } else {
      EXPECT_LE(rate(accepted, drafts), 0.5) << accepted << "/" << drafts;
    }
  }
}

TEST_F(DraftModelTest, RefusesAMissingDraftBackend) {
  EXPECT_THROW({ Engine engine(*backend, tokenizer, draft_options(true)); }, Error);
  EXPECT_THROW(make_draft_proposer(SpecDecodeOptions{0, 1, 3, true}, *backend, nullptr), Error);
  GenerationOptions options;
  options.spec = SpecDecodeOptions{0, 1, 3, true};
  EXPECT_THROW(Generator(*backend).run({1, 2, 3}, options, [](int32_t) {}), Error);
}

}  // namespace
}  // namespace qs
