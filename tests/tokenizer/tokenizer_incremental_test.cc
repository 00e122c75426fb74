// IncrementalDecoder: streamed text equals the full decode and every chunk is valid UTF-8.
#include "tokenizer/incremental_decoder.h"

#include <gtest/gtest.h>

#include "support/tokenizer_test_support.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace qs {
namespace {

using test::corpus_cases;
using test::qwen_tokenizer;

constexpr const char* kReplacement = "\xEF\xBF\xBD";

// Streams `ids` one at a time; checks every chunk is valid UTF-8 and returns the concatenation.
std::string stream_all(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDecoder decoder(tok, skip_special);
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string chunk = decoder.feed(ids[i]);
    EXPECT_TRUE(tokenizer_detail::utf8_is_valid(chunk))
        << "chunk after id #" << i << " (" << ids[i] << ")";
    EXPECT_LE(decoder.pending_bytes(), 3u);
    text += chunk;
  }
  const std::string rest = decoder.flush();
  EXPECT_TRUE(tokenizer_detail::utf8_is_valid(rest));
  EXPECT_EQ(decoder.pending_bytes(), 0u);
  return text + rest;
}

// Id of the single-byte token for byte `b`.
int32_t byte_token(const Tokenizer& tok, uint8_t b) {
  const std::string byte(1, static_cast<char>(b));
  return *tok.token_to_id(tokenizer_detail::bytes_to_byte_level(byte));
}

TEST(IncrementalDecoder, CorpusStreamEqualsFullDecode) {
  const Tokenizer& tok = qwen_tokenizer();
  std::vector<int32_t> all;
  for (const auto& c : corpus_cases()) {
    const std::vector<int32_t> ids = tok.encode(c.text);
    all.insert(all.end(), ids.begin(), ids.end());
  }
  for (const bool skip : {false, true}) {
    EXPECT_EQ(stream_all(tok, all, skip), tok.decode(all, skip)) << "skip_special=" << skip;
  }
}

TEST(IncrementalDecoder, WholeVocabularyInIdOrder) {
  // Byte tokens and partial characters of every kind, including invalid sequences.
  const Tokenizer& tok = qwen_tokenizer();
  std::vector<int32_t> ids(static_cast<size_t>(tok.vocab_size()));
  for (int32_t i = 0; i < tok.vocab_size(); ++i) ids[static_cast<size_t>(i)] = i;
  EXPECT_EQ(stream_all(tok, ids, false), tok.decode(ids));
}

TEST(IncrementalDecoder, HoldsBackIncompleteCharacter) {
  const Tokenizer& tok = qwen_tokenizer();
  IncrementalDecoder decoder(tok);
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xE4)), "");  // 你 = E4 BD A0
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xBD)), "");
  EXPECT_EQ(decoder.pending_bytes(), 2u);
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xA0)), "\xE4\xBD\xA0");
  EXPECT_EQ(decoder.feed(byte_token(tok, 'a')), "a");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(IncrementalDecoder, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer& tok = qwen_tokenizer();
  IncrementalDecoder decoder(tok);
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xFF)), kReplacement);  // can never start a character
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xE4)), "");
  EXPECT_EQ(decoder.feed(byte_token(tok, 'x')), std::string(kReplacement) + "x");
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xF0)), "");
  EXPECT_EQ(decoder.feed(byte_token(tok, 0x9F)), "");
  EXPECT_EQ(decoder.flush(), kReplacement);  // truncated F0 9F at the end: one U+FFFD
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xED)), "");
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xA0)), std::string(kReplacement) + kReplacement);
}

TEST(IncrementalDecoder, SkipsSpecialTokensAndResets) {
  const Tokenizer& tok = qwen_tokenizer();
  IncrementalDecoder decoder(tok, /*skip_special=*/true);
  EXPECT_EQ(decoder.feed(*tok.token_to_id("<|im_start|>")), "");
  EXPECT_EQ(decoder.feed(*tok.token_to_id("<think>")), "<think>");
  EXPECT_EQ(decoder.feed(byte_token(tok, 0xE4)), "");
  decoder.reset();
  EXPECT_EQ(decoder.pending_bytes(), 0u);
  EXPECT_EQ(decoder.flush(), "");
}

TEST(IncrementalDecoder, LossyDecodingMatchesMaximalSubpartRule) {
  // Unicode 3.9 / WHATWG examples: one U+FFFD per maximal subpart.
  EXPECT_EQ(tokenizer_detail::utf8_lossy("\xC0\xAF"), std::string(kReplacement) + kReplacement);
  EXPECT_EQ(tokenizer_detail::utf8_lossy("\xE0\x80\xAF"),
            std::string(kReplacement) + kReplacement + kReplacement);
  EXPECT_EQ(tokenizer_detail::utf8_lossy("\xF4\x90\x80\x80"),
            std::string(kReplacement) + kReplacement + kReplacement + kReplacement);
  EXPECT_EQ(tokenizer_detail::utf8_lossy("\xE1\x80" "A"), std::string(kReplacement) + "A");
  EXPECT_EQ(tokenizer_detail::utf8_lossy("\xF1\x80\x80"), kReplacement);
  EXPECT_EQ(tokenizer_detail::utf8_lossy("ok\xF0\x9F\x98\x80"), "ok\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace qs
