// tokenizer_data_from_gguf on the Qwen3 vocabulary converted to GGUF arrays the way llama.cpp's
// convert_hf_to_gguf.py does it (tokenizer.ggml.model "gpt2", pre "qwen2"): must encode exactly
// like the tokenizer.json path and the reference ids.
#include <gtest/gtest.h>

#include "support/tokenizer_test_support.h"
#include "tokenizer/tokenizer.h"

namespace qs {
namespace {

using test::corpus_cases;
using test::escaped;
using test::ids_to_string;

constexpr int32_t kQwen3ConfigVocabSize = 151936;  // config.json vocab_size (padded)

struct GgufArrays {
  std::vector<std::string> tokens;
  std::vector<std::string> merges;
  std::vector<int64_t> token_types;
};

// llama.cpp: added tokens keep their content; special ones or ones that look special
// ("<|...|>") are CONTROL (3), the others USER_DEFINED (4); ids missing from the vocabulary up
// to the model's vocab_size become "[PAD<id>]" UNUSED (5); the rest are NORMAL (1).
GgufArrays to_gguf_arrays(const TokenizerData& data) {
  GgufArrays g;
  g.tokens.resize(kQwen3ConfigVocabSize);
  g.token_types.assign(kQwen3ConfigVocabSize, 5);
  for (int32_t id = 0; id < kQwen3ConfigVocabSize; ++id) {
    g.tokens[id] = "[PAD" + std::to_string(id) + "]";
  }
  for (size_t id = 0; id < data.vocab.size(); ++id) {
    if (data.vocab[id].empty()) continue;
    g.tokens[id] = data.vocab[id];
    g.token_types[id] = 1;
  }
  for (const AddedToken& t : data.added_tokens) {
    const bool looks_special = t.content.starts_with("<|") && t.content.ends_with("|>");
    g.tokens[t.id] = t.content;
    g.token_types[t.id] = (t.special || looks_special) ? 3 : 4;
  }
  for (const auto& [a, b] : data.merges) g.merges.push_back(a + " " + b);
  return g;
}

const Tokenizer& gguf_tokenizer() {
  static const Tokenizer tok = [] {
    GgufArrays g = to_gguf_arrays(test::qwen_tokenizer_data());
    return Tokenizer(tokenizer_data_from_gguf(std::move(g.tokens), std::move(g.merges),
                                              std::move(g.token_types), 151643, 151645, 151643));
  }();
  return tok;
}

TEST(TokenizerGguf, EncodesCorpusLikeReference) {
  const Tokenizer& tok = gguf_tokenizer();
  size_t mismatches = 0;
  for (const auto& c : corpus_cases()) {
    const std::vector<int32_t> ids = tok.encode(c.text);
    if (ids == c.ids) continue;
    if (mismatches++ == 0) {
      ADD_FAILURE() << "first mismatch [" << c.tag << "] text \"" << escaped(c.text)
                    << "\"\n  gguf:      " << ids_to_string(ids)
                    << "\n  reference: " << ids_to_string(c.ids);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << corpus_cases().size() << " corpus strings";
}

TEST(TokenizerGguf, DecodesLikeJsonTokenizer) {
  const Tokenizer& tok = gguf_tokenizer();
  for (const auto& c : corpus_cases()) EXPECT_EQ(tok.decode(c.ids), c.decoded) << escaped(c.text);
}

TEST(TokenizerGguf, VocabularyAndSpecialIds) {
  const Tokenizer& tok = gguf_tokenizer();
  EXPECT_EQ(tok.vocab_size(), kQwen3ConfigVocabSize);
  EXPECT_EQ(tok.bos_id(), 151643);
  EXPECT_EQ(tok.eos_id(), 151645);
  EXPECT_EQ(tok.pad_id(), 151643);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.token_to_id("<think>"), 151667);
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_FALSE(tok.is_special(151667));  // USER_DEFINED
  EXPECT_TRUE(tok.is_special(151659));   // <|fim_prefix|>: CONTROL in GGUF (looks special)
  EXPECT_EQ(tok.token_bytes(151700), "");  // UNUSED padding id: no text
  EXPECT_EQ(tok.token_to_id("[PAD151700]"), std::nullopt);
  // Every regular token has the same bytes as in the tokenizer.json form.
  const Tokenizer& json_tok = test::qwen_tokenizer();
  for (int32_t id = 0; id < json_tok.vocab_size(); ++id) {
    ASSERT_EQ(tok.token_bytes(id), json_tok.token_bytes(id)) << id;
  }
}

}  // namespace
}  // namespace qs
