// Regular-expression, choice and GBNF grammars: acceptance tables written from the ECMAScript
// regex / GBNF semantics, plus the errors for unsupported constructs and malformed grammars.
#include <gtest/gtest.h>

#include <string>

#include "constrained_test_support.h"
#include "core/error.h"

namespace qs::test {
namespace {

using constrained::GrammarSource;

bool re(const std::string& pattern, const std::string& text) { return matches(GrammarSource::regex(pattern), text); }
bool gbnf(const std::string& g, const std::string& text) { return matches(GrammarSource::gbnf(g), text); }

TEST(RegexGrammar, FullMatchSemantics) {
  EXPECT_TRUE(re("a|bc", "a"));
  EXPECT_TRUE(re("a|bc", "bc"));
  EXPECT_FALSE(re("a|bc", "abc"));
  EXPECT_TRUE(re("^x{2,3}$", "xxx"));
  EXPECT_FALSE(re("x{2,3}", "xxxx"));
  EXPECT_FALSE(re("x{2,3}", "x"));
  EXPECT_TRUE(re("x{2,}", "xxxxxxx"));
  EXPECT_TRUE(re("(ab)+c?", "ababc"));
  EXPECT_FALSE(re("(ab)+c?", "abac"));
  EXPECT_TRUE(re("[^0-9]\\d\\w\\s", "a1_ "));
  EXPECT_FALSE(re("[^0-9]", "5"));
  EXPECT_TRUE(re("a.c", "a\xe2\x82\xac" "c"));  // '.' is one code point (U+20AC, 3 bytes)
  EXPECT_FALSE(re("a.c", "a\nc"));
  EXPECT_TRUE(re("[\\u00e0-\\u00e5]", "\xc3\xa3"));
  EXPECT_TRUE(re("\\x41\\u{1F600}", "A\xf0\x9f\x98\x80"));
  EXPECT_TRUE(re("(?:a|b)(?<n>c)", "bc"));
  EXPECT_TRUE(re("a*?b", "aab"));
  EXPECT_TRUE(re("\\.\\*\\[", ".*["));
  // Repeated parts that can be empty (an empty-string loop through tail calls, not left
  // recursion).
  EXPECT_TRUE(re("(a?)*b", "aab"));
  EXPECT_TRUE(re("(a*|c)+", "aaca"));
  EXPECT_TRUE(re("(a*)*", ""));
  EXPECT_FALSE(re("(a?)*b", "ac"));
  EXPECT_TRUE(re("[a\\-z]", "-"));
  EXPECT_FALSE(re("[a\\-z]", "b"));
}

TEST(RegexGrammar, UnsupportedConstructsAreErrors) {
  for (const char* bad : {"(a)\\1", "a(?=b)", "a(?!b)", "(?<=a)b", "\\bword", "a++", "a{2,1}", "(ab", "ab)", "[z-a]", "*a", "a^b", "a$b", "\\q"}) {
    EXPECT_THROW(constrained::parse_grammar_source(GrammarSource::regex(bad)), Error) << bad;
  }
}

TEST(ChoiceGrammar, ExactlyOneChoice) {
  const auto src = GrammarSource::choices({"yes", "no", "yes please"});
  EXPECT_TRUE(matches(src, "yes"));
  EXPECT_TRUE(matches(src, "yes please"));
  EXPECT_TRUE(matches(src, "no"));
  EXPECT_FALSE(matches(src, "ye"));
  EXPECT_FALSE(matches(src, "nope"));
  EXPECT_THROW(constrained::parse_grammar_source(GrammarSource{constrained::GrammarKind::kChoices, "[]"}), Error);
  EXPECT_THROW(constrained::parse_grammar_source(GrammarSource{constrained::GrammarKind::kChoices, "[1]"}), Error);
}

TEST(GbnfGrammar, Syntax) {
  const std::string g =
      "# a comment\n"
      "root ::= greeting \" \" name (\"!\" | \"?\")?\n"
      "greeting ::= \"hi\" | \"hello\"   # trailing comment\n"
      "name ::= [A-Z] [a-z]*\n";
  EXPECT_TRUE(gbnf(g, "hi Bob"));
  EXPECT_TRUE(gbnf(g, "hello Al!"));
  EXPECT_FALSE(gbnf(g, "hello al"));
  EXPECT_FALSE(gbnf(g, "hey Bob"));
  EXPECT_TRUE(gbnf("root ::= [0-9]{2,3} \"\\n\"", "123\n"));
  EXPECT_FALSE(gbnf("root ::= [0-9]{2,3}", "1234"));
  EXPECT_TRUE(gbnf("root ::= (\n  \"a\"\n  | \"b\"\n)+", "abba"));
  EXPECT_TRUE(gbnf("root ::= \"a\"\n  | \"b\"", "b"));  // continuation line starting with '|'
  EXPECT_TRUE(gbnf("root ::= [^\\n\"]+", "x\xc3\xa9y"));
  EXPECT_FALSE(gbnf("root ::= [^\\n\"]+", "x\"y"));
  EXPECT_TRUE(gbnf("root ::= \"\\u00e9\\x41\" .", "\xc3\xa9" "A\xe6\x97\xa5"));
  EXPECT_TRUE(gbnf("root ::= x\nx ::= \"b\"? x | \"c\"", "bbc"));  // tail-position cycle
  EXPECT_TRUE(gbnf("root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= list | \"1\"", "[1,[[]],[1,1]]"));
}

void expect_gbnf_error(const std::string& g, const std::string& needle) {
  try {
    constrained::parse_grammar_source(GrammarSource::gbnf(g));
    ADD_FAILURE() << "no error for " << g;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GbnfGrammar, Errors) {
  expect_gbnf_error("start ::= \"a\"", "no 'root' rule");
  expect_gbnf_error("root ::= missing", "'missing' is used but not defined");
  expect_gbnf_error("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
  expect_gbnf_error("root ::= root \"a\" | \"b\"", "left-recursive");
  expect_gbnf_error("root ::= x \"a\" | \"c\"\nx ::= y? root\ny ::= \"b\"", "left-recursive");
  expect_gbnf_error("root ::= \"abc", "unterminated string");
  expect_gbnf_error("root ::= [abc", "unterminated character class");
  expect_gbnf_error("root ::= <think>", "token references");
  expect_gbnf_error("root = \"a\"", "expected '::='");
  expect_gbnf_error("root ::= (\"a\"", "missing ')'");
  expect_gbnf_error("root ::= \"a\"{3,1}", "n < m");
  expect_gbnf_error("root ::= \"a\" root", "unsatisfiable");  // no finite string
}

}  // namespace
}  // namespace qs::test
