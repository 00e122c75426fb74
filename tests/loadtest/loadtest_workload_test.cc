// Workload generation (src/loadtest/workload.h): arrival process, lengths, prompts, datasets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "loadtest/workload.h"

namespace qs::loadtest {
namespace {

// Gaps of a gamma(k, 1/(rate k)) process have mean 1/rate, variance 1/(rate^2 k) and excess
// kurtosis 6/k. The sample mean of n gaps has standard error sd/sqrt(n); the sample variance has
// relative standard error about sqrt((kurtosis - 1) / n). Allow 5 standard errors.
TEST(LoadtestArrivals, GammaGapsHaveTheRequestedMeanAndVariance) {
  constexpr size_t n = 20000;
  constexpr double rate = 5.0;
  for (double k : {0.5, 1.0, 3.0}) {
    const std::vector<double> t = arrival_times_s(n, rate, k, 7);
    ASSERT_EQ(t.size(), n);
    std::vector<double> gaps(n);
    gaps[0] = t[0];
    for (size_t i = 1; i < n; ++i) {
      ASSERT_GE(t[i], t[i - 1]);
      gaps[i] = t[i] - t[i - 1];
    }
    const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / n;
    double var = 0;
    for (double g : gaps) var += (g - mean) * (g - mean);
    var /= (n - 1);
    const double want_mean = 1 / rate;
    const double want_var = 1 / (rate * rate * k);
    const double mean_tol = 5 * std::sqrt(want_var / n);
    const double var_rel_tol = 5 * std::sqrt((3 + 6 / k - 1) / n);
    EXPECT_NEAR(mean, want_mean, mean_tol) << "k=" << k;
    EXPECT_NEAR(var / want_var, 1.0, var_rel_tol) << "k=" << k;
  }
}

TEST(LoadtestArrivals, InfiniteRateSendsAllAtOnceAndSeedIsReproducible) {
  for (double t : arrival_times_s(10, INFINITY, 1.0, 1)) EXPECT_EQ(t, 0.0);
  EXPECT_EQ(arrival_times_s(50, 2.0, 1.0, 9), arrival_times_s(50, 2.0, 1.0, 9));
  EXPECT_NE(arrival_times_s(50, 2.0, 1.0, 9), arrival_times_s(50, 2.0, 1.0, 10));
}

TEST(LoadtestWorkload, LengthRanges) {
  EXPECT_EQ(parse_length_range("256", "--x").min_tokens, 256);
  const LengthRange r = parse_length_range("128:512", "--x");
  EXPECT_EQ(r.min_tokens, 128);
  EXPECT_EQ(r.max_tokens, 512);
  EXPECT_THROW(parse_length_range("512:128", "--x"), Error);
  EXPECT_THROW(parse_length_range("abc", "--x"), Error);
  EXPECT_THROW(parse_length_range("-3", "--x"), Error);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const int v = sample_length(r, rng);
    EXPECT_GE(v, 128);
    EXPECT_LE(v, 512);
  }
}

int count_words(const std::string& text) {
  std::istringstream in(text);
  std::string w;
  int n = 0;
  while (in >> w) ++n;
  return n;
}

TEST(LoadtestWorkload, PromptBuilderFitsTheCounter) {
  // A fake tokenizer: 3 template tokens plus one per word plus one per 4 words (multi-token words).
  TokenCounter counter = [](const std::string& text) -> std::optional<int> {
    const int w = count_words(text);
    return 3 + w + w / 4;
  };
  PromptBuilder prompts(counter, 5);
  for (int target : {10, 64, 257}) {
    const std::string text = prompts.build(target);
    EXPECT_TRUE(prompts.measured());
    EXPECT_LE(std::abs(*counter(text) - target), 1) << target;
  }
  PromptBuilder unmeasured(nullptr, 5);
  EXPECT_EQ(count_words(unmeasured.build(40)), 40);
  EXPECT_FALSE(unmeasured.measured());
}

TEST(LoadtestWorkload, RandomConversationsAddUpToNumRequests) {
  PromptBuilder prompts(nullptr, 1);
  WorkloadOptions o;
  o.num_requests = 7;
  o.turns_per_user = 3;
  o.input = {8, 8};
  o.output = {4, 6};
  const auto w = build_workload(o, prompts);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].turns.size(), 3u);
  EXPECT_EQ(w[2].turns.size(), 1u);
  for (const auto& c : w) {
    for (const auto& t : c.turns) {
      EXPECT_EQ(count_words(t.user_text), 8);
      EXPECT_GE(t.max_tokens, 4);
      EXPECT_LE(t.max_tokens, 6);
    }
  }
}

TEST(LoadtestWorkload, DatasetTurnsAndPrefix) {
  const std::string path = ::testing::TempDir() + "/loadtest_dataset.jsonl";
  {
    std::ofstream out(path);
    out << R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"a"},)"
        << R"({"role":"assistant","content":"x"},{"role":"user","content":"b"},)"
        << R"({"role":"user","content":"c"}]})" << "\n\n"
        << R"({"messages":[{"role":"user","content":"d"}]})" << "\n";
  }
  PromptBuilder prompts(nullptr, 1);
  WorkloadOptions o;
  o.num_requests = 5;
  o.turns_per_user = 2;
  o.output = {16, 16};
  o.dataset_path = path;
  const auto w = build_workload(o, prompts);
  ASSERT_EQ(w.size(), 3u);  // 2 + 1 + 2 turns
  ASSERT_EQ(w[0].prefix_messages.size(), 1u);
  EXPECT_EQ(w[0].turns[0].user_text, "a");
  EXPECT_EQ(w[0].turns[1].user_text, "b");
  EXPECT_EQ(w[1].turns[0].user_text, "d");
  EXPECT_EQ(w[2].turns.size(), 2u);
  EXPECT_EQ(w[2].turns[0].max_tokens, 16);

  {
    std::ofstream out(path);
    out << "{\"messages\": 3}\n";
  }
  EXPECT_THROW(build_workload(o, prompts), Error);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace qs::loadtest
