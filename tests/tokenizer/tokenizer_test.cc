// Qwen3 tokenizer against the reference ids from @huggingface/tokenizers (see
// tests/fixtures/tokenizer/generate.mjs) and basic API behaviour on the real vocabulary.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "support/tokenizer_test_support.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace qs {
namespace {

using test::corpus_cases;
using test::escaped;
using test::ids_to_string;
using test::qwen_tokenizer;

TEST(TokenizerCorpus, HasEnoughCases) { EXPECT_GE(corpus_cases().size(), 300u); }

TEST(TokenizerCorpus, EncodesLikeReference) {
  const Tokenizer& tok = qwen_tokenizer();
  size_t mismatches = 0;
  for (const auto& c : corpus_cases()) {
    const std::vector<int32_t> ids = tok.encode(c.text);
    if (ids == c.ids) continue;
    if (mismatches++ == 0) {
      ADD_FAILURE() << "first mismatch [" << c.tag << "] text \"" << escaped(c.text)
                    << "\"\n  ours:      " << ids_to_string(ids)
                    << "\n  reference: " << ids_to_string(c.ids);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << corpus_cases().size() << " corpus strings";
}

TEST(TokenizerCorpus, DecodeRoundTripsToNfcText) {
  const Tokenizer& tok = qwen_tokenizer();
  for (const auto& c : corpus_cases()) {
    ASSERT_TRUE(tokenizer_detail::utf8_is_valid(c.text)) << c.tag;
    const std::string decoded = tok.decode(tok.encode(c.text));
    EXPECT_EQ(decoded, tokenizer_detail::nfc_normalize(c.text))
        << "[" << c.tag << "] " << escaped(c.text);
    EXPECT_EQ(decoded, c.decoded) << "[" << c.tag << "] " << escaped(c.text);
  }
}

TEST(TokenizerCorpus, DecodesReferenceIdsLikeReference) {
  const Tokenizer& tok = qwen_tokenizer();
  for (const auto& c : corpus_cases()) {
    EXPECT_EQ(tok.decode(c.ids), c.decoded) << escaped(c.text);
    EXPECT_EQ(tok.decode(c.ids, /*skip_special=*/true), c.decoded_skip_special) << escaped(c.text);
  }
}

TEST(TokenizerQwen, SpecialTokensAndConfig) {
  const Tokenizer& tok = qwen_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.token_to_id("<think>"), 151667);
  EXPECT_EQ(tok.token_to_id("Ġthe"), 279);
  EXPECT_EQ(tok.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(tok.eos_id(), 151645);  // tokenizer_config.json eos_token
  EXPECT_EQ(tok.pad_id(), 151643);
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is an added but not special token
  EXPECT_FALSE(tok.is_special(279));
  EXPECT_FALSE(tok.is_special(-1));
  EXPECT_FALSE(tok.is_special(1 << 30));
  EXPECT_EQ(tok.token_bytes(279), " the");
  EXPECT_EQ(tok.token_bytes(151644), "<|im_start|>");
  const std::vector<int32_t> chat = tok.encode("<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(tok.decode(chat, /*skip_special=*/true), "user\nhi");
}

TEST(TokenizerQwen, EveryByteHasAToken) {
  const Tokenizer& tok = qwen_tokenizer();
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    const auto id = tok.token_to_id(tokenizer_detail::bytes_to_byte_level(byte));
    ASSERT_TRUE(id.has_value()) << b;
    EXPECT_EQ(tok.token_bytes(*id), byte);
  }
}

TEST(TokenizerQwen, InvalidUtf8InputIsReplaced) {
  const Tokenizer& tok = qwen_tokenizer();
  EXPECT_EQ(tok.encode("a\xFF" "b"), tok.encode("a\xEF\xBF\xBD" "b"));
  EXPECT_EQ(tok.encode("\xE4\xBD"), tok.encode("\xEF\xBF\xBD"));
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(TokenizerQwen, LongRunsDoNotExhaustRegexResources) {
  const Tokenizer& tok = qwen_tokenizer();
  for (const std::string unit : {" ", "\n", "\t \r\n", "a", "1", "!", "\xE2\x80\x83"}) {
    std::string text;
    while (text.size() < 300000) text += unit;
    text += "x";
    EXPECT_EQ(tok.decode(tok.encode(text)), text) << escaped(unit);
  }
}

// All corpus strings joined (about 100 KB of mixed scripts, code and whitespace).
std::string big_mixed_text() {
  std::string text;
  while (text.size() < 100000) {
    for (const auto& c : corpus_cases()) text += c.text + "\n";
  }
  return text;
}

TEST(TokenizerQwen, Encodes100KBQuickly) {
  const Tokenizer fresh(test::qwen_tokenizer_data());  // empty BPE cache
  const std::string text = big_mixed_text();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = fresh.encode(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(fresh.decode(ids), tokenizer_detail::nfc_normalize(text));
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
  const double limit = 20.0;  // instrumented or unoptimized build
#else
  const double limit = 1.0;
#endif
  EXPECT_LT(seconds, limit) << text.size() << " bytes took " << seconds << " s";
  RecordProperty("encode_100kb_seconds", std::to_string(seconds));
}

TEST(TokenizerQwen, ConcurrentEncodeMatchesSequential) {
  const Tokenizer fresh(test::qwen_tokenizer_data());
  const std::string text = big_mixed_text();
  const std::vector<int32_t> expected = qwen_tokenizer().encode(text);
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = fresh.encode(text); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r == expected);
}

}  // namespace
}  // namespace qs
