// Sampled (non-greedy) speculative decoding with a draft model that samples its drafts from its
// own distribution q (engine/draft_model_proposer.h) and a target that verifies them with
// Leviathan et al.'s accept / resample step (sampling/rejection_sampler.h), on the in-memory
// random models (vocab 300):
//  - the joint distribution of the first 4 output tokens of a fixed prompt (temperature 1,
//    top-k 3: at most 81 outcomes) is the same with and without speculation, in `generate`'s
//    path and in the serving engine, whether the draft is the target itself (q ~ p, nearly all
//    accepted) or another random model (q far from p: with these two random models every such
//    draft was rejected, so the residual draws do all the work). Two-sample Pearson chi-square
//    over 2000 seeds per arm, at the 0.01% point. Control: the draft model's own output (what
//    "accept always" would emit) fails the same test.
//  - a self-draft accepts nearly all (>= 97%) of its sampled drafts, as q == p up to rounding
//    (argmax drafts would be accepted only with probability p(argmax));
//  - same seed + same settings give the same tokens; the engine counts drafts and accepted
//    drafts of sampled requests (qwenserve_spec_*_tokens_total are fed from these).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>

#include "engine/draft_model_proposer.h"
#include "engine/generator.h"
#include "support/chi_square.h"
#include "support/engine_test_support.h"

namespace qs {
namespace {

constexpr int kSeeds = 2000;
constexpr double kZ = 3.719;  // standard-normal upper 0.01% point
constexpr int32_t kTokens = 4;

using Outcomes = std::map<std::vector<int32_t>, int64_t>;

const std::vector<int32_t> kPrompt = {72, 101, 108, 108, 111, 44, 32, 119, 111};

SamplingParams sampled(uint64_t seed) {
  SamplingParams s;
  s.temperature = 1.0f;
  s.top_k = 3;
  s.seed = seed;
  return s;
}

GenerationResult generate(Backend& target, Backend* draft, uint64_t seed) {
  GenerationOptions options;
  options.max_tokens = kTokens;
  options.sampling = sampled(seed);
  if (draft != nullptr) options.spec = SpecDecodeOptions{0, 1, 3, true};
  return Generator(target, draft).run(kPrompt, options, [](int32_t) {});
}

// One backend thread each: thousands of short generations, no thread handoff per matmul.
struct SpecSamplingTest : EngineFixture {
  RandomModel other{Architecture::kQwen3, DType::F32, 98765};
  std::unique_ptr<Backend> target = cpu_test_backend(model, KvDType::kF16, 128, 32, 256, 1);
  std::unique_ptr<Backend> self_draft = cpu_test_backend(model, KvDType::kF16, 128, 32, 256, 1);
  std::unique_ptr<Backend> other_draft = cpu_test_backend(other, KvDType::kF16, 128, 32, 256, 1);

  // The target without speculation: the reference distribution.
  Outcomes plain_outcomes() {
    Outcomes o;
    for (int s = 0; s < kSeeds; ++s) ++o[generate(*target, nullptr, 100000 + s).output_ids];
    return o;
  }
};

void expect_same_distribution(const Outcomes& a, const Outcomes& b, const char* what) {
  const auto [chi2, df] = stats::two_sample_chi_square(a, b);
  ASSERT_GT(df, 5) << what << ": too few outcomes for a meaningful test";
  EXPECT_LT(chi2, stats::chi_square_critical(df, kZ)) << what << " (df " << df << ")";
}

void expect_different_distribution(const Outcomes& a, const Outcomes& b, const char* what) {
  const auto [chi2, df] = stats::two_sample_chi_square(a, b);
  EXPECT_GT(chi2, stats::chi_square_critical(df, kZ)) << what << " (df " << df << ")";
}

double rate(int64_t accepted, int64_t drafts) { return drafts > 0 ? static_cast<double>(accepted) / static_cast<double>(drafts) : 0.0; }

TEST_F(SpecSamplingTest, GeneratorKeepsTheTargetDistributionWithSampledDrafts) {
  const Outcomes plain = plain_outcomes();
  for (Backend* draft : {self_draft.get(), other_draft.get()}) {
    const bool self = draft == self_draft.get();
    Outcomes spec;
    int64_t drafts = 0, accepted = 0;
    for (int s = 0; s < kSeeds; ++s) {
      // Seeds differ from the reference's, so the two samples are independent.
      const GenerationResult r = generate(*target, draft, 200000 + s);
      ++spec[r.output_ids];
      drafts += r.spec_draft_tokens;
      accepted += r.spec_accepted_tokens;
    }
    expect_same_distribution(plain, spec, self ? "self draft" : "other draft");
    EXPECT_GT(drafts, kSeeds);
    if (self) {
      // q == p up to rounding: nearly every draft accepted (point-mass drafts would be accepted
      // with probability p(argmax) < 1 at temperature 1, top-k 3).
      EXPECT_GE(rate(accepted, drafts), 0.97) << accepted << "/" << drafts;
    } else {
      // The two random models' top-3 sets hardly meet: drafts are (nearly) all rejected and the
      // residual draws normalize(max(0, p - q)) make the tokens. Partial acceptance with all
      // transforms is covered against exact distributions in speculative_sampling_test.cc.
      EXPECT_LE(rate(accepted, drafts), 0.7) << accepted << "/" << drafts;
    }
  }
  // Control: the draft model's own outputs (what accepting every draft would emit) differ.
  Outcomes draft_alone;
  for (int s = 0; s < kSeeds; ++s) ++draft_alone[generate(*other_draft, nullptr, 300000 + s).output_ids];
  expect_different_distribution(plain, draft_alone, "draft model alone");
}

TEST_F(SpecSamplingTest, SeededSampledOutputsAreReproducible) {
  for (Backend* draft : {self_draft.get(), other_draft.get()}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      GenerationOptions options;
      options.max_tokens = 40;
      options.sampling = sampled(seed);
      options.sampling.top_k = 0;
      options.spec = SpecDecodeOptions{0, 1, 4, true};
      const GenerationResult a = Generator(*target, draft).run(kPrompt, options, [](int32_t) {});
      const GenerationResult b = Generator(*target, draft).run(kPrompt, options, [](int32_t) {});
      EXPECT_EQ(a.output_ids, b.output_ids) << "seed " << seed;
      EXPECT_EQ(a.spec_accepted_tokens, b.spec_accepted_tokens);
      EXPECT_GT(a.spec_draft_tokens, 0);
    }
  }
}

// Up to `seqs` sequences of 1 + 3 tokens per verify chunk within the backend's 32-token steps.
EngineOptions spec_engine_options(int32_t seqs) {
  EngineOptions o = engine_options(seqs, 32);
  o.guard.enabled = false;
  o.spec = SpecDecodeOptions{0, 1, 3, true};
  return o;
}

std::vector<EngineRequest> sampled_requests(uint64_t first_seed, int n) {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    r.prompt_ids = kPrompt;
    r.max_tokens = kTokens;
    r.sampling = sampled(first_seed + static_cast<uint64_t>(i));
    requests.push_back(r);
  }
  return requests;
}

TEST_F(SpecSamplingTest, EngineKeepsTheTargetDistributionAndCountsSampledDrafts) {
  const Outcomes plain = plain_outcomes();
  for (Backend* draft : {self_draft.get(), other_draft.get()}) {
    const bool self = draft == self_draft.get();
    const std::vector<EngineRequest> requests = sampled_requests(400000, kSeeds);
    Engine engine(*target, tokenizer, spec_engine_options(8), draft);
    const std::vector<Collected> out = run_all(engine, requests);
    Outcomes spec;
    int64_t drafts = 0, accepted = 0;
    for (const Collected& c : out) {
      ASSERT_EQ(c.error, "");
      ++spec[c.tokens];
      drafts += c.spec_draft_tokens;
      accepted += c.spec_accepted_tokens;
    }
    expect_same_distribution(plain, spec, self ? "engine, self draft" : "engine, other draft");
    // Sampled requests feed the speculative counters (/metrics reads these per request).
    const EngineStats st = settled_stats(engine);
    EXPECT_EQ(st.spec_draft_tokens_total, drafts);
    EXPECT_EQ(st.spec_accepted_tokens_total, accepted);
    EXPECT_GT(drafts, kSeeds);
    EXPECT_GT(st.spec_propose_steps_total, 0);
    if (self) {
      EXPECT_GE(rate(accepted, drafts), 0.97) << accepted << "/" << drafts;
    }
  }
}

// 4 sequences x (1 + 3) tokens never exceed the step's budget, so every verify chunk keeps the
// drafts proposed and the run does not depend on the engine's timing.
TEST_F(SpecSamplingTest, EngineSeededSampledOutputsAreReproducible) {
  std::vector<EngineRequest> requests = sampled_requests(7, 12);
  for (EngineRequest& r : requests) {
    r.max_tokens = 30;
    r.sampling.top_k = 0;
    r.sampling.repetition_penalty = 1.3f;  // penalties on the draft side too
  }
  std::vector<Collected> first;
  {
    Engine engine(*target, tokenizer, spec_engine_options(4), other_draft.get());
    first = run_all(engine, requests);
  }
  Engine engine(*target, tokenizer, spec_engine_options(4), other_draft.get());
  const std::vector<Collected> second = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(first[i].error, "");
    EXPECT_EQ(first[i].tokens, second[i].tokens) << "request " << i;
    EXPECT_GT(first[i].spec_draft_tokens, 0) << "request " << i;
  }
}

}  // namespace
}  // namespace qs
