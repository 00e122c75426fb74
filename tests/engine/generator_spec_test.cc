// `generate`'s path (Generator over SequenceRunner) with n-gram speculation: the same tokens as
// without it, greedy and seeded sampled, and drafts verified in one step and accepted.
#include <gtest/gtest.h>

#include <random>

#include "engine/generator.h"
#include "support/engine_test_support.h"

namespace qs {
namespace {

GenerationResult generate(Backend& backend, const std::vector<int32_t>& prompt, GenerationOptions options, bool spec,
                          bool adaptive = false) {
  if (spec) options.spec = SpecDecodeOptions{3, 1, 4};
  options.spec.adaptive = spec && adaptive;
  Generator generator(backend);
  std::vector<int32_t> streamed;
  GenerationResult r = generator.run(prompt, options, [&](int32_t t) { streamed.push_back(t); });
  EXPECT_EQ(streamed, r.output_ids);  // every token is streamed once, in order
  return r;
}

TEST_F(EngineFixture, GeneratorSpecMatchesPlainGreedyAndSampled) {
  std::mt19937 rng(3);
  int64_t accepted = 0, accepted_adaptive = 0;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt(5 + i * 3);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % 256);
    GenerationOptions options;
    options.max_tokens = 50;
    options.sampling.temperature = i % 2 == 0 ? 0.0f : 0.9f;
    options.sampling.seed = 50 + i;
    if (i % 2 == 1) options.sampling.logit_bias = {{65, 5.0f}, {66, 5.0f}};
    options.stop_token_ids = {299};
    const GenerationResult plain = generate(*backend, prompt, options, false);
    const GenerationResult spec = generate(*backend, prompt, options, true);
    EXPECT_EQ(spec.output_ids, plain.output_ids) << "prompt " << i;
    // --spec-adaptive: other draft counts, the same tokens.
    const GenerationResult adaptive = generate(*backend, prompt, options, true, true);
    EXPECT_EQ(adaptive.output_ids, plain.output_ids) << "prompt " << i << " (adaptive)";
    EXPECT_LE(adaptive.spec_accepted_tokens, adaptive.spec_draft_tokens);
    accepted_adaptive += adaptive.spec_accepted_tokens;
    EXPECT_EQ(spec.finish_reason, plain.finish_reason);
    EXPECT_EQ(plain.spec_draft_tokens, 0);
    EXPECT_LE(spec.spec_accepted_tokens, spec.spec_draft_tokens);
    accepted += spec.spec_accepted_tokens;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(accepted_adaptive, 0);
}

TEST_F(EngineFixture, GeneratorSpecAcceptsEveryDraftOfARepeatingOutput) {
  GenerationOptions options;
  options.max_tokens = 21;
  options.sampling.temperature = 0;
  options.sampling.logit_bias = {{65, 100.0f}};
  const GenerationResult r = generate(*backend, {65, 65, 65, 65}, options, true);
  EXPECT_EQ(r.output_ids, std::vector<int32_t>(21, 65));
  // 1 token from the prefill, then 4 steps of 4 drafts + 1 (21 tokens).
  EXPECT_EQ(r.decode_steps, 4);
  EXPECT_EQ(r.spec_draft_tokens, 16);
  EXPECT_EQ(r.spec_accepted_tokens, 16);
}

}  // namespace
}  // namespace qs
