// Error handling of the tokenizer loaders and API, on small synthetic tokenizers (no Qwen files).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace qs {
namespace {

// Message of the qs::Error thrown by `fn`, or a failure when none is thrown.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected qs::Error";
  return "";
}

#define EXPECT_ERROR_CONTAINS(statement, needle)                               \
  do {                                                                         \
    const std::string message_ = error_of([&] { (void)(statement); });         \
    EXPECT_NE(message_.find(needle), std::string::npos) << "message: " << message_; \
  } while (0)

// A byte-level vocabulary: the 256 single bytes, then "ab", "abc", plus two added tokens.
TokenizerData tiny_data() {
  TokenizerData data;
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    data.vocab.push_back(tokenizer_detail::bytes_to_byte_level(byte));
  }
  data.vocab.push_back("ab");
  data.vocab.push_back("abc");
  data.merges = {{"a", "b"}, {"ab", "c"}};
  data.added_tokens = {{258, "<|end|>", true}, {259, "<x>", false}};
  data.eos_id = 258;
  return data;
}

std::string write_temp(const std::string& name, const std::string& content) {
  const std::string dir = ::testing::TempDir() + "qs_tokenizer_errors";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(TokenizerSynthetic, EncodesAndDecodes) {
  const Tokenizer tok(tiny_data());
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok.encode("abab<|end|>"), (std::vector<int32_t>{256, 256, 258}));
  EXPECT_EQ(tok.decode(tok.encode("abab<x>c<|end|>"), /*skip_special=*/true), "abab<x>c");
  EXPECT_EQ(tok.eos_id(), 258);
}

TEST(TokenizerErrors, MissingFile) {
  EXPECT_ERROR_CONTAINS(load_tokenizer_json("/nonexistent/dir/tokenizer.json"),
                        "/nonexistent/dir/tokenizer.json: cannot open");
}

TEST(TokenizerErrors, MalformedJson) {
  const std::string path = write_temp("malformed.json", "{\"model\": {\"type\": \"BPE\",");
  EXPECT_ERROR_CONTAINS(load_tokenizer_json(path), path + ": invalid JSON");
}

TEST(TokenizerErrors, NotATokenizerJson) {
  const std::string path = write_temp("array.json", "[1, 2, 3]");
  EXPECT_ERROR_CONTAINS(load_tokenizer_json(path), "no \"model\" object");
}

TEST(TokenizerErrors, NonBpeModel) {
  const std::string path = write_temp(
      "wordpiece.json",
      R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}, "decoder": {"type": "WordPiece"}})");
  EXPECT_ERROR_CONTAINS(load_tokenizer_json(path), "model.type is 'WordPiece', only BPE");
}

TEST(TokenizerErrors, BpeWithoutByteLevel) {
  const std::string path = write_temp(
      "metaspace.json",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
          "pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "Metaspace"}})");
  EXPECT_ERROR_CONTAINS(load_tokenizer_json(path), "decoder is not ByteLevel");
}

TEST(TokenizerErrors, UnsupportedBpeOptions) {
  const std::string path = write_temp(
      "fallback.json",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": true},
          "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}})");
  EXPECT_ERROR_CONTAINS(load_tokenizer_json(path), "unsupported BPE options");
}

TEST(TokenizerErrors, BadMergeEntry) {
  const std::string path = write_temp(
      "badmerge.json",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]},
          "pre_tokenizer": {"type": "ByteLevel", "use_regex": true},
          "decoder": {"type": "ByteLevel"}})");
  EXPECT_ERROR_CONTAINS(load_tokenizer_json(path), "model.merges[0]");
}

TEST(TokenizerErrors, MinimalJsonWithBothMergeForms) {
  for (const char* merges : {R"(["a b"])", R"([["a", "b"]])"}) {
    const std::string path = write_temp(
        "minimal.json", std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1,
        "ab": 2, "Ġ": 3}, "merges": )") + merges + R"(}, "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "use_regex": true},
        "decoder": {"type": "ByteLevel"}, "added_tokens": [{"id": 4, "content": "<s>",
        "special": true}]})");
    const Tokenizer tok(load_tokenizer_json(path));
    EXPECT_EQ(tok.encode("ab ab<s>"), (std::vector<int32_t>{2, 3, 2, 4})) << merges;
  }
}

TEST(TokenizerErrors, OutOfRangeIds) {
  const Tokenizer tok(tiny_data());
  const std::vector<int32_t> too_big = {1, 260};
  const std::vector<int32_t> negative = {-1};
  EXPECT_ERROR_CONTAINS(tok.decode(too_big), "token id 260 outside the vocabulary (size 260)");
  EXPECT_ERROR_CONTAINS(tok.decode(negative), "token id -1 outside");
  EXPECT_ERROR_CONTAINS(tok.token_bytes(1000), "token id 1000 outside");
  IncrementalDecoder stream(tok);
  EXPECT_ERROR_CONTAINS(stream.feed(260), "token id 260 outside");
}

TEST(TokenizerErrors, InconsistentData) {
  TokenizerData unknown_merge = tiny_data();
  unknown_merge.merges.push_back({"x", "yz"});
  EXPECT_ERROR_CONTAINS(Tokenizer(unknown_merge), "merge 2 'x yz'");
  TokenizerData bad_regex = tiny_data();
  bad_regex.split_regex = "(unclosed";
  EXPECT_ERROR_CONTAINS(Tokenizer(bad_regex), "regex does not compile");
  TokenizerData bad_eos = tiny_data();
  bad_eos.eos_id = 5000;
  EXPECT_ERROR_CONTAINS(Tokenizer(bad_eos), "eos id 5000 outside");
  TokenizerData bad_added = tiny_data();
  bad_added.added_tokens.push_back({-3, "<bad>", true});
  EXPECT_ERROR_CONTAINS(Tokenizer(bad_added), "invalid id -3");
}

TEST(TokenizerErrors, GgufArrays) {
  EXPECT_ERROR_CONTAINS(tokenizer_data_from_gguf({"a", "b"}, {}, {1}, {}, {}, {}),
                        "token_type has 1 entries for 2 tokens");
  EXPECT_ERROR_CONTAINS(tokenizer_data_from_gguf({"a", "b"}, {}, {1, 9}, {}, {}, {}),
                        "token 1 has unknown token type 9");
  EXPECT_ERROR_CONTAINS(tokenizer_data_from_gguf({"a", "b"}, {"ab"}, {1, 1}, {}, {}, {}),
                        "merges[0] 'ab'");
  EXPECT_ERROR_CONTAINS(tokenizer_data_from_gguf({"a", "b"}, {}, {}, {}, 7, {}),
                        "eos id 7 outside");
}

}  // namespace
}  // namespace qs
