// Response cache (server/response_cache.h): LRU bounded in bytes, canonical keys, what is
// deterministic, the "cache" field.
#include <gtest/gtest.h>

#include <random>

#include "server/api_error.h"
#include "server/response_builder.h"
#include "server/response_cache.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

CachedResponse response_with_text(size_t n) {
  CachedResponse r;
  r.choices.push_back({std::string(n, 'x'), std::vector<int32_t>(n / 4, 7), {}, "stop", "stop_token", 5, 3, 0});
  return r;
}

TEST(ResponseCache, EvictsLeastRecentlyUsedWithinTheByteBound) {
  const size_t one = response_with_text(1000).bytes("a");
  ResponseCache cache(2 * one + one / 2);  // room for two entries, not three
  cache.insert("a", response_with_text(1000));
  cache.insert("b", response_with_text(1000));
  ASSERT_NE(cache.find("a"), nullptr);  // a is now the most recently used
  cache.insert("c", response_with_text(1000));
  EXPECT_NE(cache.find("a"), nullptr);
  EXPECT_EQ(cache.find("b"), nullptr);  // evicted
  EXPECT_NE(cache.find("c"), nullptr);
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.bytes(), 2 * one);
}

TEST(ResponseCache, NeverHoldsMoreThanItsBound) {
  ResponseCache cache(20000);
  std::mt19937 rng(3);
  for (int i = 0; i < 500; ++i) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 9000)(rng);
    cache.insert("k" + std::to_string(i % 37), response_with_text(n));
    ASSERT_LE(cache.bytes(), 20000u);
  }
  cache.insert("huge", response_with_text(50000));  // alone above the bound: not stored
  EXPECT_EQ(cache.find("huge"), nullptr);
}

TEST(ResponseCache, ReplacingAKeyKeepsTheAccountExact) {
  ResponseCache cache(1 << 20);
  cache.insert("k", response_with_text(100));
  cache.insert("k", response_with_text(300));
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.bytes(), response_with_text(300).bytes("k"));
}

std::string key_of(const ojson& body, float temperature = 0, int32_t top_k = 0, bool seed = false) {
  return response_cache_key(body, "chat", "qwenserve", {1, 2, 3}, temperature, top_k, seed);
}

TEST(ResponseCacheKey, AnyFieldChangeIsAnotherKey) {
  const ojson base = {{"messages", ojson::array()}, {"temperature", 0}, {"max_tokens", 8}};
  const std::string k = key_of(base);
  ASSERT_FALSE(k.empty());
  for (const auto& [name, value] : std::vector<std::pair<std::string, ojson>>{
           {"max_tokens", 9}, {"stop", "x"}, {"top_p", 0.5}, {"logprobs", true}, {"tools", ojson::array()},
           {"response_format", {{"type", "json_object"}}}, {"n", 2}}) {
    ojson changed = base;
    changed[name] = value;
    EXPECT_NE(key_of(changed), k) << name;
  }
  EXPECT_NE(response_cache_key(base, "chat", "qwenserve", {1, 2, 4}, 0, 0, false), k);  // another prompt
  EXPECT_NE(response_cache_key(base, "completions", "qwenserve", {1, 2, 3}, 0, 0, false), k);
  EXPECT_NE(response_cache_key(base, "chat", "other", {1, 2, 3}, 0, 0, false), k);
}

TEST(ResponseCacheKey, TransportFieldsAndKeyOrderDoNotMatter) {
  const ojson a = {{"messages", ojson::array()}, {"temperature", 0}, {"max_tokens", 8}};
  const ojson b = {{"max_tokens", 8}, {"temperature", 0}, {"stream", true},
                   {"stream_options", {{"include_usage", true}}}, {"cache", true}, {"model", "alias"}};
  EXPECT_EQ(key_of(a), key_of(b));
}

TEST(ResponseCacheKey, OnlyDeterministicRequests) {
  const ojson body = {{"temperature", 0.7}};
  EXPECT_EQ(key_of(body, 0.7f), "");                      // sampled without a seed: never cached
  EXPECT_NE(key_of(body, 0.7f, 0, true), "");             // an explicit seed fixes the draws
  EXPECT_NE(key_of(body, 0.7f, 1, false), "");            // top_k 1 is greedy
  EXPECT_NE(key_of(ojson{{"temperature", 0}}, 0.0f), "");
}

TEST(ResponseCacheField, CacheFalseBypassesAndBadTypesAre400) {
  EXPECT_TRUE(cache_allowed_by(ojson::object()));
  EXPECT_FALSE(cache_allowed_by(ojson{{"cache", false}}));
  try {
    cache_allowed_by(ojson{{"cache", "no"}});
    FAIL() << "expected ApiError";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "cache");
  }
}

TEST(ResponseCache, ChoicesRoundTrip) {
  std::vector<ChoiceState> choices(1);
  choices[0].text = "hi";
  choices[0].tokens = {4, 5};
  choices[0].finish_reason = "length";
  choices[0].prompt_tokens = 3;
  choices[0].completion_tokens = 2;
  choices[0].cached_tokens = 1;
  const std::vector<ChoiceState> back = from_cached(to_cached(choices));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].text, "hi");
  EXPECT_EQ(back[0].tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(back[0].finish_reason, "length");
  EXPECT_EQ(back[0].completion_tokens, 2);
  EXPECT_EQ(back[0].cached_tokens, 1);
  EXPECT_TRUE(back[0].done);
}

}  // namespace
}  // namespace qs
