// Counted repetitions (Grammar::repeats): a one-character body with a large bound (maxLength,
// minLength, regex and GBNF {m,n}) is one node whose count lives in the parser stack. The
// accepted language is checked at the bounds (n-1, n, n+1 characters) against the rule of the
// schema / pattern itself; the grammar and its compile-time mask cache do not grow with the
// bound (element and classified-position counts, not timings); on the real Qwen3 vocabulary the
// mask at the bounds equals the exact parser for every token and the length rule for every token
// made of plain ASCII characters.
#include <gtest/gtest.h>

#include <string>

#include "constrained_test_support.h"

namespace qs::test {
namespace {

using constrained::GrammarCompiler;
using constrained::GrammarMatcher;
using constrained::GrammarSource;

std::string quoted(size_t n, char c = 'a') { return "\"" + std::string(n, c) + "\""; }

TEST(CountedRepeat, MaxLengthTenThousandAtTheBound) {
  const std::string schema = R"({"type":"string","maxLength":10000})";
  EXPECT_TRUE(schema_matches(schema, quoted(0)));
  EXPECT_TRUE(schema_matches(schema, quoted(9999)));
  EXPECT_TRUE(schema_matches(schema, quoted(10000)));
  EXPECT_FALSE(schema_matches(schema, quoted(10001)));
  // Escapes and multi-byte characters count as one character each.
  EXPECT_TRUE(schema_matches(schema, "\"" + std::string(9998, 'a') + "\\n\u00e9\""));
  EXPECT_FALSE(schema_matches(schema, "\"" + std::string(9999, 'a') + "\\n\u00e9\""));
}

TEST(CountedRepeat, MinAndMaxLengthAtBothBounds) {
  const std::string schema = R"({"type":"string","minLength":5000,"maxLength":10000})";
  EXPECT_FALSE(schema_matches(schema, quoted(4999)));
  EXPECT_TRUE(schema_matches(schema, quoted(5000)));
  EXPECT_TRUE(schema_matches(schema, quoted(5001)));
  EXPECT_TRUE(schema_matches(schema, quoted(10000)));
  EXPECT_FALSE(schema_matches(schema, quoted(10001)));
  const std::string at_least = R"({"type":"string","minLength":20})";  // {20,} unbounded above
  EXPECT_FALSE(schema_matches(at_least, quoted(19)));
  EXPECT_TRUE(schema_matches(at_least, quoted(20)));
  EXPECT_TRUE(schema_matches(at_least, quoted(12345)));
}

TEST(CountedRepeat, RegexAndGbnfBoundsAtTheBound) {
  const auto re = GrammarSource::regex("x[0-9]{0,5000}y");
  EXPECT_TRUE(matches(re, "xy"));
  EXPECT_TRUE(matches(re, "x" + std::string(4999, '7') + "y"));
  EXPECT_TRUE(matches(re, "x" + std::string(5000, '7') + "y"));
  EXPECT_FALSE(matches(re, "x" + std::string(5001, '7') + "y"));
  const auto exact = GrammarSource::regex("[a-c]{300}");
  EXPECT_FALSE(matches(exact, std::string(299, 'b')));
  EXPECT_TRUE(matches(exact, std::string(300, 'b')));
  EXPECT_FALSE(matches(exact, std::string(301, 'b')));
  const auto gbnf = GrammarSource::gbnf("root ::= \"<\" [a-z]{2,5000} \">\"");
  EXPECT_FALSE(matches(gbnf, "<a>"));
  EXPECT_TRUE(matches(gbnf, "<ab>"));
  EXPECT_TRUE(matches(gbnf, "<" + std::string(5000, 'q') + ">"));
  EXPECT_FALSE(matches(gbnf, "<" + std::string(5001, 'q') + ">"));
}

// The compile is bounded: the same grammar size and the same number of positions classified at
// compile time for a bound of 24 and of 10000 (the chain expansion grew linearly in the bound).
TEST(CountedRepeat, GrammarAndMaskCacheDoNotGrowWithTheBound) {
  GrammarCompiler compiler(tiny_vocab(), {}, 0);
  const auto small = compiler.compile(GrammarSource::json_schema(R"({"type":"string","maxLength":24})"));
  const auto large = compiler.compile(GrammarSource::json_schema(R"({"type":"string","maxLength":10000})"));
  ASSERT_EQ(large->grammar.repeats.size(), 1u);
  EXPECT_EQ(large->grammar.repeats[0].max, 10000);
  EXPECT_EQ(small->grammar.elements.size(), large->grammar.elements.size());
  EXPECT_LT(large->grammar.elements.size(), 100u);
  EXPECT_EQ(small->position_tokens->n_built(), large->position_tokens->n_built());
  const auto re_small = compiler.compile(GrammarSource::regex("[0-9]{0,50}"));
  const auto re_large = compiler.compile(GrammarSource::regex("[0-9]{0,5000}"));
  EXPECT_EQ(re_small->grammar.elements.size(), re_large->grammar.elements.size());
}

std::vector<uint32_t> mask_of(GrammarMatcher& m) {
  std::vector<uint32_t> w(static_cast<size_t>(m.mask_words()), 0u);
  m.fill_next_token_bitmask(w.data());
  return w;
}

/// The length rule of {"type":"string","minLength":lo,"maxLength":hi} for a token made of
/// printable ASCII other than a backslash, after `have` characters of the string: characters up
/// to a closing quote that ends the token (nothing may follow the string).
bool length_rule_allows(const std::string& t, size_t have, size_t lo, size_t hi) {
  const size_t q = t.find('"');
  if (q == std::string::npos) return have + t.size() <= hi;
  return q + 1 == t.size() && have + q >= lo && have + q <= hi;
}

bool plain_ascii(const std::string& t) {
  if (t.empty()) return false;
  for (char c : t) {
    if (c < 0x20 || c > 0x7e || c == '\\') return false;
  }
  return true;
}

// Every bit of the mask at n-2, n-1 and n characters (and at the minimum) equals the exact parser,
// and for plain-ASCII tokens the schema's length rule.
TEST(CountedRepeat, QwenMaskAtTheBoundsEqualsParserAndLengthRule) {
  const auto vocab = qwen_vocab();
  GrammarCompiler compiler(vocab);
  const size_t lo = 3000, hi = 10000;
  const auto g = compiler.compile(GrammarSource::json_schema(
      R"({"type":"string","minLength":)" + std::to_string(lo) + R"(,"maxLength":)" + std::to_string(hi) + "}"));
  size_t checked_rule = 0;
  for (size_t have : {size_t{0}, lo - 20, lo - 1, lo, hi - 40, hi - 2, hi - 1, hi}) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.accept_bytes("\"" + std::string(have, 'a')));
    const auto w = mask_of(m);
    for (int32_t id = 0; id < vocab->rows(); ++id) {
      const bool ok = m.accept_token(id);
      ASSERT_EQ(ok, bit(w, id)) << have << " chars, token " << id << " '" << vocab->bytes(id) << "'";
      if (ok) m.rollback(1);
      if (id < vocab->size() && vocab->is_grammar_token(id) && plain_ascii(vocab->bytes(id))) {
        ASSERT_EQ(bit(w, id), length_rule_allows(vocab->bytes(id), have, lo, hi))
            << have << " chars, token '" << vocab->bytes(id) << "'";
        ++checked_rule;
      }
    }
  }
  EXPECT_GT(checked_rule, 100000u);
}

}  // namespace
}  // namespace qs::test
