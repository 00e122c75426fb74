// GrammarMatcher on the tiny byte vocabulary: stop tokens only where the grammar may end, special
// and out-of-vocabulary ids never, rollback restores the exact earlier mask, compile limits and
// the cache.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "constrained_test_support.h"
#include "core/error.h"

namespace qs::test {
namespace {

using constrained::CompileLimits;
using constrained::GrammarCompiler;
using constrained::GrammarMatcher;
using constrained::GrammarSource;

std::vector<uint32_t> mask_of(GrammarMatcher& m) {
  std::vector<uint32_t> w(static_cast<size_t>(m.mask_words()), 0xFFFFFFFFu);
  m.fill_next_token_bitmask(w.data());
  return w;
}

TEST(GrammarMatcher, StopOnlyWhereTheGrammarMayEnd) {
  GrammarMatcher m(tiny_compile(GrammarSource::choices({"ab", "abc"})));
  EXPECT_FALSE(bit(mask_of(m), kTinyStop));
  EXPECT_FALSE(m.accept_token(kTinyStop));
  ASSERT_TRUE(m.accept_token('a'));
  EXPECT_FALSE(bit(mask_of(m), kTinyStop));
  ASSERT_TRUE(m.accept_token('b'));
  auto w = mask_of(m);
  EXPECT_TRUE(bit(w, kTinyStop));
  EXPECT_TRUE(bit(w, 'c'));
  EXPECT_FALSE(bit(w, 'd'));
  EXPECT_TRUE(m.can_terminate());
  ASSERT_TRUE(m.accept_token(kTinyStop));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token('c'));
}

TEST(GrammarMatcher, MaskMatchesAcceptTokenForEveryId) {
  // Multi-byte tokens ("{\"", "\":", "\",\"", "12", "abc", ...) cross rule boundaries.
  const auto g = tiny_compile(GrammarSource::json_schema(
      R"({"type":"object","properties":{"ab":{"type":"string","maxLength":4},"n":{"type":"array","items":{"type":"integer"}}},"required":["ab"]})"));
  const std::string text = R"({"ab":"abc","n":[12,1]})";
  for (size_t prefix = 0; prefix <= text.size(); ++prefix) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_bytes(text.substr(0, prefix)));
    const auto w = mask_of(m);
    for (int32_t id = 0; id < kTinyRows; ++id) {
      GrammarMatcher probe(g);
      ASSERT_TRUE(probe.accept_bytes(text.substr(0, prefix)));
      EXPECT_EQ(bit(w, id), probe.accept_token(id)) << "prefix '" << text.substr(0, prefix) << "' id " << id;
    }
    for (int32_t id : {kTinySpecial, 302, 310, 319}) EXPECT_FALSE(bit(w, id));
    for (size_t k = kTinyRows / 32; k < w.size(); ++k) EXPECT_EQ(w[k], 0u);
  }
}

TEST(GrammarMatcher, RollbackRestoresState) {
  GrammarMatcher m(tiny_compile(GrammarSource::regex("(ab|abc)x[0-9]+")));
  const auto start = mask_of(m);
  ASSERT_TRUE(m.accept_token(256 + 8));  // "abc"
  const auto after_abc = mask_of(m);
  ASSERT_TRUE(m.accept_token('x'));
  ASSERT_TRUE(m.accept_token('1'));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_EQ(m.num_accepted(), 3u);
  m.rollback(2);
  EXPECT_EQ(mask_of(m), after_abc);
  EXPECT_FALSE(m.can_terminate());
  m.rollback(1);
  EXPECT_EQ(mask_of(m), start);
  EXPECT_THROW(m.rollback(1), Error);
  ASSERT_TRUE(m.accept_token('a'));
  ASSERT_TRUE(m.accept_token('b'));
  ASSERT_TRUE(m.accept_token('x'));
  ASSERT_TRUE(m.accept_token('7'));
  ASSERT_TRUE(m.accept_token(kTinyStop));
  m.rollback(1);  // undo the stop token
  EXPECT_FALSE(m.is_terminated());
  EXPECT_TRUE(m.accept_token('8'));
}

TEST(GrammarMatcher, RejectedTokenLeavesStateUnchanged) {
  GrammarMatcher m(tiny_compile(GrammarSource::regex("[a-c]+")));
  const auto before = mask_of(m);
  EXPECT_FALSE(m.accept_token('z'));
  EXPECT_FALSE(m.accept_token(kTinySpecial));
  EXPECT_FALSE(m.accept_token(-1));
  EXPECT_FALSE(m.accept_token(kTinyRows));
  EXPECT_FALSE(m.accept_token(310));  // a row past the vocabulary
  EXPECT_EQ(m.num_accepted(), 0u);
  EXPECT_EQ(mask_of(m), before);
}

TEST(GrammarCompiler, LimitsTurnHostileInputIntoErrors) {
  CompileLimits small;
  small.max_symbols = 500;
  GrammarCompiler c(tiny_vocab(), small);
  // Bounded repetition of a group (maxItems) is unrolled, so its size grows with the bound; a
  // one-character repetition (string maxLength) is one counted node and stays small.
  EXPECT_THROW(c.compile(GrammarSource::json_schema(R"({"type":"array","items":{"type":"integer"},"maxItems":5000})")),
               Error);
  EXPECT_NO_THROW(c.compile(GrammarSource::json_schema(R"({"type":"string","maxLength":5000})")));
  CompileLimits states;
  states.max_parser_states = 3;
  GrammarCompiler c2(tiny_vocab(), states);
  EXPECT_THROW(c2.compile(GrammarSource::json_object()), Error);
  CompileLimits time;
  time.max_seconds = 0;
  GrammarCompiler c3(tiny_vocab(), time);
  try {
    c3.compile(GrammarSource::json_object());
    ADD_FAILURE() << "no time limit error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("time limit"), std::string::npos) << e.what();
  }
  // A repetition bound above CompileLimits::max_repeat.
  GrammarCompiler c4(tiny_vocab());
  EXPECT_THROW(c4.compile(GrammarSource::regex("a{20000}")), Error);
}

TEST(GrammarMatcher, MaskWorkLimitFailsTheMaskNotTheMatcher) {
  // The grammar fuzz target's slow input (tests/fuzz/regressions/grammar_fuzz): 1,521 live parses
  // inside the counted repeat of a negated class. Behind an "x" the first mask is cheap, so the
  // grammar compiles; the mask after "x" passes the limit and throws, as often as it is asked for,
  // and the matcher stays usable (rollback gives the first mask back).
  const std::string slow = "[^-az]{15}(-[,-]90)c+.(.o0)c+.(.om|org)";
  CompileLimits limits;
  limits.max_mask_steps = 50'000;
  GrammarCompiler c(tiny_vocab(), limits, 0);
  try {
    c.compile(GrammarSource::regex(slow));
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous at output token 0"), std::string::npos) << e.what();
  }
  GrammarMatcher m(c.compile(GrammarSource::regex("x" + slow)));
  const auto first = mask_of(m);
  ASSERT_TRUE(m.accept_token('x'));
  for (int i = 0; i < 2; ++i) {
    try {
      mask_of(m);
      ADD_FAILURE() << "no mask work error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("too ambiguous at output token 1"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(m.num_accepted(), 1u);
  EXPECT_TRUE(m.accept_token('q'));  // the parser itself still answers
  m.rollback(2);
  EXPECT_EQ(mask_of(m), first);
  // Under the default limit the same grammar's masks are built.
  GrammarMatcher d(tiny_compile(GrammarSource::regex("x" + slow)));
  ASSERT_TRUE(d.accept_token('x'));
  EXPECT_TRUE(bit(mask_of(d), 'q'));
}

TEST(GrammarMatcher, LiveParseLimitFailsTheStepNotTheMatcher) {
  // The grammar fuzz target's second slow input: a group that can be empty, repeated 15 times,
  // multiplies the parses (22,984 live stacks at the start; each token steps all of them).
  const std::string slow = "([^-az]*){15}(-[,-]90)c+.(.o0)c+.(.om|org)";
  GrammarCompiler c(tiny_vocab(), CompileLimits{}, 0);
  try {
    c.compile(GrammarSource::regex(slow));
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous at output token 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("live parses (the limit is 10000)"), std::string::npos) << e.what();
  }
  // Behind an "x" it compiles; taking the "x" passes the limit, throws, and changes nothing.
  GrammarMatcher m(c.compile(GrammarSource::regex("x" + slow)));
  const auto first = mask_of(m);
  EXPECT_TRUE(bit(first, 'x'));
  try {
    m.accept_token('x');
    ADD_FAILURE() << "no live-parse error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous at output token 0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.num_accepted(), 0u);
  EXPECT_EQ(mask_of(m), first);
  EXPECT_FALSE(m.accept_token('y'));
  // A higher limit takes it.
  CompileLimits loose;
  loose.max_live_parses = 100'000;
  GrammarCompiler c2(tiny_vocab(), loose, 0);
  GrammarMatcher m2(c2.compile(GrammarSource::regex("x" + slow)));
  EXPECT_TRUE(m2.accept_token('x'));
}

TEST(GrammarCompiler, CompilesRunAtMostMaxConcurrentAtOnce) {
  // Eight threads compile eight different few-millisecond grammars (cache misses all): never more
  // than two at once; cache hits do not wait for a slot.
  CompileLimits limits;
  limits.max_concurrent_compiles = 2;
  GrammarCompiler c(tiny_vocab(), limits);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&c, i] {
      std::vector<std::string> choices;
      for (int k = 0; k < 3000; ++k) choices.push_back("c" + std::to_string(i) + "_" + std::to_string(k));
      c.compile(GrammarSource::choices(choices));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GE(c.peak_concurrent_compiles(), 1);
  EXPECT_LE(c.peak_concurrent_compiles(), 2);
  EXPECT_EQ(c.cache_size(), 8u);
}

TEST(GrammarCompiler, CacheKeyedBySource) {
  GrammarCompiler c(tiny_vocab());
  const auto a = c.compile(GrammarSource::regex("a+"));
  const auto b = c.compile(GrammarSource::regex("a+"));
  const auto d = c.compile(GrammarSource::gbnf("root ::= \"a\"+"));
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), d.get());
  EXPECT_EQ(c.cache_hits(), 1u);
  EXPECT_EQ(c.cache_size(), 2u);
  GrammarCompiler two(tiny_vocab(), {}, 2);
  const auto x = two.compile(GrammarSource::regex("x"));
  two.compile(GrammarSource::regex("y"));
  two.compile(GrammarSource::regex("z"));  // evicts "x", the least recently used
  EXPECT_EQ(two.cache_size(), 2u);
  EXPECT_NE(two.compile(GrammarSource::regex("x")).get(), x.get());
  GrammarCompiler tiny_budget(tiny_vocab(), {}, 100, 1);  // bytes bound: keeps only the newest
  tiny_budget.compile(GrammarSource::regex("x"));
  tiny_budget.compile(GrammarSource::regex("y"));
  EXPECT_EQ(tiny_budget.cache_size(), 1u);
}

TEST(GrammarCompiler, DeepNestingIsAnErrorNotACrash) {
  const std::string parens = std::string(100000, '(') + "a" + std::string(100000, ')');
  EXPECT_THROW(constrained::parse_grammar_source(GrammarSource::regex(parens)), Error);
  EXPECT_THROW(constrained::parse_grammar_source(GrammarSource::gbnf("root ::= " + parens)), Error);
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += R"({"items":)";
  deep += "{}";
  deep += std::string(100000, '}');
  try {
    constrained::parse_grammar_source(GrammarSource::json_schema(deep));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper"), std::string::npos) << e.what();
  }
}

TEST(GrammarMatcher, MatchersOnThreadsShareOneGrammar) {
  // Matchers on several threads fill the grammar's shared tops cache concurrently; every thread
  // must see the masks a lone matcher computes.
  GrammarCompiler c(tiny_vocab());
  const auto g = c.compile(GrammarSource::json_schema(
      R"({"type":"object","properties":{"a":{"type":"string","maxLength":6},"b":{"enum":["x","yy"]}},"required":["a","b"]})"));
  const std::string text = R"({"a":"ab\n","b":"yy"})";
  std::vector<std::vector<uint32_t>> expected;
  {
    GrammarCompiler fresh(tiny_vocab());
    GrammarMatcher m(fresh.compile(GrammarSource::json_schema(
        R"({"type":"object","properties":{"a":{"type":"string","maxLength":6},"b":{"enum":["x","yy"]}},"required":["a","b"]})")));
    for (char ch : text) {
      expected.push_back(mask_of(m));
      ASSERT_TRUE(m.accept_token(static_cast<uint8_t>(ch)));
    }
  }
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        GrammarMatcher m(g);
        for (size_t i = 0; i < text.size(); ++i) {
          if (mask_of(m) != expected[i]) ++failures[t];
          if (!m.accept_token(static_cast<uint8_t>(text[i]))) ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace qs::test
