// Token masks over the real Qwen3 vocabulary (151,936 logits rows): at states reached by random
// walks, every one of the 151,936 bits equals what the exact byte-level parser says when the
// token is fed to accept_token (the mask cache and the parser are separate code paths); ids past
// the tokenizer's 151,669 tokens and special tokens are never allowed; no state reached through
// allowed tokens has an empty mask (no dead ends).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "constrained_test_support.h"
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

}  // namespace
}  // namespace qs::test
