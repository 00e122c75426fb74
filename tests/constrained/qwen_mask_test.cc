// Token masks over the real Qwen3 vocabulary (151,936 logits rows): at states reached by random
// walks, every one of the 151,936 bits equals what the exact byte-level parser says when the
// token is fed to accept_token (the mask cache and the parser are separate code paths); ids past
// the tokenizer's 151,669 tokens and special tokens are never allowed; no state reached through
// allowed tokens has an empty mask (no dead ends).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "constrained_test_support.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace qs::test {
namespace {

using constrained::GrammarCompiler;
using constrained::GrammarMatcher;
using constrained::GrammarSource;

std::vector<int32_t> allowed_ids(const std::vector<uint32_t>& w, int32_t rows) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < rows; ++id) {
    if (bit(w, id)) out.push_back(id);
  }
  return out;
}

void check_grammar(const GrammarSource& src, int check_every, uint64_t seed) {
  const auto vocab = qwen_vocab();
  ASSERT_EQ(vocab->rows(), 151936);
  ASSERT_EQ(vocab->size(), 151669);
  GrammarCompiler compiler(vocab);
  GrammarMatcher m(compiler.compile(src));
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> w(static_cast<size_t>(vocab->mask_words()));
  for (int step = 0; step < 60 && !m.is_terminated(); ++step) {
    m.fill_next_token_bitmask(w.data());
    const auto allowed = allowed_ids(w, vocab->rows());
    ASSERT_FALSE(allowed.empty()) << "dead end at step " << step;
    for (int32_t id = vocab->size(); id < vocab->rows(); ++id) ASSERT_FALSE(bit(w, id)) << id;
    for (int32_t id = 151643; id < vocab->size(); ++id) {
      if (!vocab->is_stop(id) && !vocab->is_grammar_token(id)) {
        ASSERT_FALSE(bit(w, id)) << id;
      }
    }
    if (step % check_every == 0) {
      for (int32_t id = 0; id < vocab->rows(); ++id) {
        const bool ok = m.accept_token(id);
        ASSERT_EQ(ok, bit(w, id)) << "step " << step << " token " << id << " '" << vocab->bytes(id) << "'";
        if (ok) m.rollback(1);
      }
    }
    const int32_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.accept_token(pick));
  }
}

TEST(QwenMask, JsonSchemaMaskEqualsParser) {
  check_grammar(GrammarSource::json_schema(
                    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer","minimum":-20,"maximum":300},"tags":{"type":"array","items":{"enum":["a","b c","d\"e"]},"maxItems":3},"extra":{"type":["number","null"]}},"required":["name","n","tags"]})"),
                6, 1);
}

TEST(QwenMask, JsonObjectMaskEqualsParser) { check_grammar(GrammarSource::json_object(), 8, 2); }

TEST(QwenMask, RegexAndGbnfMaskEqualsParser) {
  check_grammar(GrammarSource::regex("(Mr|Ms)\\. [A-Z][a-z]{1,10}, [0-9]{1,3} (street|road)"), 4, 3);
  check_grammar(GrammarSource::gbnf("root ::= \"<\" tag \">\" [^<]{0,20} \"</\" tag \">\"\ntag ::= \"b\" | \"em\""), 4, 4);
}

// Counted repeats of a wide class leave most of the vocabulary uncertain (tokens that cross a
// character boundary inside the repeat): the exact parser checks them in trie order, and the masks
// still equal the parser's answer for every id.
TEST(QwenMask, CountedWideClassMaskEqualsParser) {
  check_grammar(GrammarSource::regex(".{100}"), 20, 5);
  check_grammar(GrammarSource::regex("[^x]{50}y"), 20, 6);
}

// A grammar whose first mask needs more parser work than CompileLimits::max_mask_steps is refused
// at compile time (a 400 before it is queued), with a message that says why; found by the grammar
// fuzz target (tests/fuzz/regressions/grammar_fuzz): 54 s for one mask over this vocabulary.
TEST(QwenMask, AmbiguousGrammarIsRefusedByTheMaskWorkLimit) {
  GrammarCompiler compiler(qwen_vocab());
  try {
    compiler.compile(GrammarSource::regex("[^-az]{15}(-[,-]90)c+.(.o0)c+.(.om|org)"));
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
  }
}

// Positions inside a byte sequence are classified on first use (token_mask_cache.h): whatever the
// moment, the classes are those of classifying every position at compile time.
TEST(QwenMask, PositionsClassifiedOnFirstUseEqualCompileTimeOnes) {
  const auto vocab = qwen_vocab();
  const constrained::Grammar g = constrained::parse_grammar_source(GrammarSource::json_schema(
      R"({"type":"object","properties":{"s":{"type":"string","maxLength":3},"e":{"enum":["caf\u00e9","x\\y"]},"n":{"type":"integer","maximum":99}}})"));
  const auto far = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  const constrained::TokenMaskCache lazy(g, vocab, far, 200000);
  const constrained::TokenMaskCache eager(g, vocab, far, 200000, true);
  size_t later = 0;
  for (size_t p = 0; p < g.elements.size(); ++p) {
    if (g.elements[p].kind != constrained::Element::Kind::kBytes) continue;
    later += constrained::TokenMaskCache::classified_at_compile(g, p) ? 0 : 1;
  }
  EXPECT_GT(later, 10u) << "escapes, UTF-8 continuations and literal bytes are left for first use";
  EXPECT_EQ(lazy.n_built() + later, eager.n_built());
  for (size_t p = 0; p < g.elements.size(); ++p) {
    const auto& a = lazy.at(static_cast<int32_t>(p));
    const auto& b = eager.at(static_cast<int32_t>(p));
    EXPECT_EQ(a.accepted_bits, b.accepted_bits) << p;
    EXPECT_EQ(a.accepted_ids, b.accepted_ids) << p;
    EXPECT_EQ(a.uncertain, b.uncertain) << p;
  }
  EXPECT_EQ(lazy.n_built(), eager.n_built());
}

}  // namespace
}  // namespace qs::test
