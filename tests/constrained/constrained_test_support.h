// Helpers for tests/constrained: a tiny byte vocabulary for grammar semantics, the real Qwen3
// tokenizer's vocabulary for mask tests, and a "does this whole text match" check.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "constrained/grammar_compiler.h"
#include "constrained/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace qs::test {

/// Ids 0..255: the single bytes; 256..: a few multi-byte tokens; kTinyStop is the stop token,
/// kTinySpecial a special token (never allowed); 320 logits rows.
inline constexpr int32_t kTinyStop = 300;
inline constexpr int32_t kTinySpecial = 301;
inline constexpr int32_t kTinyRows = 320;
inline const std::vector<std::string>& tiny_multi_tokens() {
  static const std::vector<std::string> t = {"\"", "{\"", "\":", "\",\"", "\"}", "true", "12", "ab", "abc", "null", "},", "\"]"};
  return t;
}

inline std::shared_ptr<const constrained::TokenVocabulary> tiny_vocab() {
  static const auto v = [] {
    std::vector<std::string> bytes(302);
    for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
    for (size_t i = 0; i < tiny_multi_tokens().size(); ++i) bytes[256 + i] = tiny_multi_tokens()[i];
    bytes[kTinyStop] = "</s>";
    bytes[kTinySpecial] = "<|special|>";
    return std::make_shared<const constrained::TokenVocabulary>(bytes, std::vector<int32_t>{kTinyStop},
                                                                std::vector<int32_t>{kTinySpecial}, kTinyRows);
  }();
  return v;
}

inline std::shared_ptr<const constrained::CompiledGrammar> tiny_compile(const constrained::GrammarSource& src) {
  static constrained::GrammarCompiler compiler(tiny_vocab());
  return compiler.compile(src);
}

/// True when the grammar accepts exactly `text` (all bytes, and may end there).
inline bool matches(const constrained::GrammarSource& src, const std::string& text) {
  constrained::GrammarMatcher m(tiny_compile(src));
  return m.accept_bytes(text) && m.can_terminate();
}

inline bool schema_matches(const std::string& schema, const std::string& text) {
  return matches(constrained::GrammarSource::json_schema(schema), text);
}

/// Directory of the real Qwen3 tokenizer ($QS_TOKENIZER_DIR or <source>/.cache/tokenizer-qwen3);
/// throws (failing, never skipping) when it is missing.
inline std::string grammar_tokenizer_dir() {
  std::string dir;
  if (const char* env = std::getenv("QS_TOKENIZER_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
    const char* src = std::getenv("QS_SOURCE_DIR");
    dir = std::string(src != nullptr && *src != '\0' ? src : QS_SOURCE_DIR) + "/.cache/tokenizer-qwen3";
  }
  if (!std::filesystem::exists(dir + "/tokenizer.json")) {
    throw std::runtime_error("Qwen3 tokenizer not found in " + dir + " (run tools/fetch-tokenizer.sh)");
  }
  return dir;
}

/// The real Qwen3 vocabulary with 151,936 logits rows and <|im_end|>, <|endoftext|> as stops.
inline std::shared_ptr<const constrained::TokenVocabulary> qwen_vocab() {
  static const auto v = [] {
    Tokenizer tok(load_tokenizer_json(grammar_tokenizer_dir() + "/tokenizer.json"));
    return constrained::TokenVocabulary::from_tokenizer(
        tok, 151936, {*tok.token_to_id("<|im_end|>"), *tok.token_to_id("<|endoftext|>")});
  }();
  return v;
}

inline bool bit(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

}  // namespace qs::test
