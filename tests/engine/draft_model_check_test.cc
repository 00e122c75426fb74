// A draft model is refused when its ids would mean other tokens than the target's: the error
// names both files and what differs (logits rows, tokenizer size, a token's spelling, a special
// flag, the EOS id); a draft with the same vocabulary passes.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/draft_model_check.h"
#include "support/engine_test_support.h"

namespace qs {
namespace {

// The byte tokenizer of the engine tests, with `edit` applied to its data first.
template <typename Edit>
Tokenizer edited_tokenizer(Edit edit) {
  TokenizerData data = byte_tokenizer_data();
  edit(data);
  return Tokenizer(std::move(data));
}

std::string refusal(const ModelConfig& target, const Tokenizer& target_tok, const ModelConfig& draft,
                    const Tokenizer& draft_tok) {
  try {
    check_draft_model_compatible("/m/target.gguf", target, target_tok, "/m/draft.gguf", draft, draft_tok);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DraftModelCheck, AcceptsTheSameVocabulary) {
  ModelConfig config;
  config.vocab_size = 300;
  EXPECT_EQ(refusal(config, byte_tokenizer(), config, byte_tokenizer()), "");
}

TEST(DraftModelCheck, NamesBothFilesAndWhatDiffers) {
  ModelConfig config;
  config.vocab_size = 300;
  ModelConfig wider = config;
  wider.vocab_size = 320;
  const Tokenizer target = byte_tokenizer();
  const std::string prefix = "the draft model /m/draft.gguf cannot draft for the target model /m/target.gguf: ";

  EXPECT_EQ(refusal(config, target, wider, target),
            prefix + "vocabulary sizes (logits rows) differ: draft 320, target 300");
  const Tokenizer longer = edited_tokenizer([](TokenizerData& d) {
    d.vocab.emplace_back();
    d.added_tokens.push_back({300, "<|extra|>", true});
  });
  EXPECT_EQ(refusal(config, target, config, longer), prefix + "tokenizers differ in size: draft 301 tokens, target 300");
  const Tokenizer respelled = edited_tokenizer([](TokenizerData& d) { d.added_tokens[3].content = "<|other|>"; });
  EXPECT_EQ(refusal(config, target, config, respelled),
            prefix + "tokenizers differ at token id 259: draft \"<|other|>\", target \"<|s3|>\"");
  const Tokenizer not_special = edited_tokenizer([](TokenizerData& d) { d.added_tokens[5].special = false; });
  EXPECT_EQ(refusal(config, target, config, not_special),
            prefix + "token id 261 (\"<|s5|>\") is special in the target tokenizer only");
  const Tokenizer other_eos = edited_tokenizer([](TokenizerData& d) { d.eos_id = 298; });
  EXPECT_EQ(refusal(config, target, config, other_eos), prefix + "EOS ids differ: draft 298, target 299");
}

}  // namespace
}  // namespace qs
