#include "cli/bench_spec.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/stats.h"
#include "engine/draft_length.h"
#include "engine/generator.h"
#include "engine/sequence_runner.h"

namespace qs::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> lcg_tokens(int64_t n, int32_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t state = seed;
  for (int32_t& id : ids) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // LCG (Knuth MMIX)
    id = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

// Median seconds of one step with k drafts (k == 0: a plain one-token decode step) for k = 0..k_max
// at a context of `context` tokens; every step is undone (truncate) so the context stays fixed.
// The k values take turns (one step of each per pass, repetitions x 8 passes after one warm-up
// pass), so a minute of low memory bandwidth slows every k alike instead of the ratios of the k
// measured in it (a Zen 5 VM swung 35-70 GB/s within one run, session 23).
std::vector<double> step_seconds(SequenceRunner& sequence, const std::vector<int32_t>& ids, int64_t context,
                                 int32_t k_max, int repetitions) {
  constexpr int kStepsPerRun = 8;
  const int32_t token = ids[static_cast<size_t>(context)];
  const auto one = [&](int32_t k) {
    const std::span<const int32_t> drafts(ids.data() + context + 1, static_cast<size_t>(k));
    const auto start = Clock::now();
    if (k == 0) {
      sequence.append(std::span<const int32_t>(&token, 1), nullptr);
    } else {
      sequence.verify(token, drafts, nullptr);
    }
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    sequence.truncate(context);
    return s;
  };
  for (int32_t k = 0; k <= k_max; ++k) one(k);  // warm-up
  std::vector<std::vector<double>> samples(static_cast<size_t>(k_max) + 1);
  for (int r = 0; r < repetitions * kStepsPerRun; ++r) {
    for (int32_t k = 0; k <= k_max; ++k) samples[static_cast<size_t>(k)].push_back(one(k));
  }
  std::vector<double> medians;
  for (const auto& s : samples) medians.push_back(median(s));
  return medians;
}

}  // namespace

void run_spec_verify_curve(Backend& backend, const SpecBenchOptions& options, double prefill_tokens_per_s) {
  const int64_t context = std::max<int64_t>(options.context_tokens, 1);
  const std::vector<int32_t> ids = lcg_tokens(context + 1 + options.verify_max, backend.vocab_rows(), 0x5DEECE66DULL);
  SequenceRunner sequence(backend);
  sequence.append(std::span<const int32_t>(ids.data(), static_cast<size_t>(context)), nullptr);
  const std::vector<double> t_step = step_seconds(sequence, ids, context, options.verify_max, options.repetitions);
  const double t_decode = t_step[0];
  if (!options.json) {
    std::printf("\nverify step with k drafts vs one decode step (context %lld tokens, median of %d steps, the k "
                "taking turns; prefill rate %.2f t/s)\n", static_cast<long long>(context), options.repetitions * 8,
                prefill_tokens_per_s);
    std::printf("| %2s | %10s | %9s | %14s | %12s | %12s | %12s |\n", "k", "step ms", "x decode", "x bound",
                "speedup a=.3", "speedup a=.5", "speedup a=.7");
    std::printf("| -- | ---------- | --------- | -------------- | ------------ | ------------ | ------------ |\n");
    std::printf("| %2d | %10.2f | %9.3f | %14s | %12s | %12s | %12s |\n", 0, t_decode * 1e3, 1.0, "", "1.00", "1.00", "1.00");
  }
  for (int32_t k = 1; k <= options.verify_max; ++k) {
    const double t = t_step[static_cast<size_t>(k)];
    // The bound: max(one decode step, k + 1 tokens at the measured prefill rate).
    const double bound = prefill_tokens_per_s > 0 ? std::max(t_decode, static_cast<double>(k + 1) / prefill_tokens_per_s) : 0.0;
    double speedup[3];
    const double rates[3] = {0.3, 0.5, 0.7};
    for (int i = 0; i < 3; ++i) speedup[i] = expected_tokens(rates[i], k) * t_decode / t;
    if (options.json) {
      nlohmann::ordered_json j = {{"test", "spec_verify"}, {"k", k}, {"context", context}, {"step_ms", t * 1e3},
                                  {"decode_step_ms", t_decode * 1e3}, {"ratio_to_decode", t / t_decode},
                                  {"ratio_to_bound", bound > 0 ? nlohmann::ordered_json(t / bound) : nlohmann::ordered_json(nullptr)},
                                  {"speedup_a03", speedup[0]}, {"speedup_a05", speedup[1]}, {"speedup_a07", speedup[2]}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      char b[32] = "n/a";
      if (bound > 0) std::snprintf(b, sizeof b, "%.3f", t / bound);
      std::printf("| %2d | %10.2f | %9.3f | %14s | %12.2f | %12.2f | %12.2f |\n", k, t * 1e3, t / t_decode, b,
                  speedup[0], speedup[1], speedup[2]);
    }
    std::fflush(stdout);
  }
}

void run_spec_repeat(Backend& backend, const SpecBenchOptions& options) {
  const std::vector<int32_t> phrase = lcg_tokens(16, backend.vocab_rows(), 0x2545F4914F6CDD1DULL);
  std::vector<int32_t> prompt;
  for (int i = 0; i < kSpecRepeatPromptTokens / 16; ++i) prompt.insert(prompt.end(), phrase.begin(), phrase.end());
  GenerationOptions gen;
  gen.max_tokens = static_cast<int32_t>(options.repeat_tokens);
  gen.sampling.temperature = 0;
  if (options.repeat_bias != 0) {
    for (int32_t id : phrase) gen.sampling.logit_bias.emplace_back(id, options.repeat_bias);
  }
  SpecDecodeOptions spec = options.spec;
  if (!spec.enabled()) spec = SpecDecodeOptions{3, 1, 4};
  Generator generator(backend);
  const auto run = [&](bool with_spec, GenerationResult& last) {
    gen.spec = with_spec ? spec : SpecDecodeOptions{};
    std::vector<double> rates;
    generator.run(prompt, gen, [](int32_t) {});  // warm-up
    for (int r = 0; r < options.repetitions; ++r) {
      last = generator.run(prompt, gen, [](int32_t) {});
      rates.push_back(last.decode_tokens_per_second());
    }
    return median(rates);
  };
  GenerationResult plain, speculative;
  const double base = run(false, plain);
  const double fast = run(true, speculative);
  const double acceptance = speculative.spec_draft_tokens > 0
                                ? static_cast<double>(speculative.spec_accepted_tokens) / static_cast<double>(speculative.spec_draft_tokens)
                                : 0.0;
  const bool identical = plain.output_ids == speculative.output_ids;
  if (options.json) {
    nlohmann::ordered_json j = {{"test", "spec_repeat"}, {"tokens", options.repeat_tokens}, {"bias", options.repeat_bias},
                                {"ngram_max", spec.ngram_max}, {"draft_max", spec.draft_max}, {"adaptive", spec.adaptive},
                                {"decode_tokens_per_second", base}, {"spec_decode_tokens_per_second", fast},
                                {"speedup", fast / base}, {"acceptance_rate", acceptance},
                                {"decode_steps", speculative.decode_steps}, {"outputs_identical", identical}};
    std::printf("%s\n", j.dump().c_str());
  } else if (!(base > 0 && fast > 0)) {
    std::printf("\nrepeating workload: %lld greedy tokens leave no timed decode steps (the first token ends the "
                "prefill): speedup n/a; use --spec-repeat 2 or more\n", static_cast<long long>(options.repeat_tokens));
  } else {
    std::printf("\nrepeating workload: %lld greedy tokens after a %lld-token prompt (a 16-token phrase x %lld, bias %.1f), "
                "median of %d run%s\n", static_cast<long long>(options.repeat_tokens),
                static_cast<long long>(kSpecRepeatPromptTokens), static_cast<long long>(kSpecRepeatPromptTokens / 16),
                options.repeat_bias, options.repetitions, options.repetitions == 1 ? "" : "s");
    std::printf("decode %.2f t/s without, %.2f t/s with --spec-ngram %d --draft-max %d%s: speedup %.2fx; acceptance %.2f "
                "(%lld of %lld drafts), %lld decode steps for %zu tokens; outputs identical: %s\n",
                base, fast, spec.ngram_max, spec.draft_max, spec.adaptive ? "" : " --no-spec-adaptive", fast / base, acceptance,
                static_cast<long long>(speculative.spec_accepted_tokens), static_cast<long long>(speculative.spec_draft_tokens),
                static_cast<long long>(speculative.decode_steps), speculative.output_ids.size(), identical ? "yes" : "NO");
  }
  std::fflush(stdout);
  if (!identical) throw Error("speculative decoding changed the greedy output of the repeating workload");
}

}  // namespace qs::cli
