// Regex pre-tokenizer: Hugging Face `Split` with behavior "Isolated" (every match is one piece and
// so is every stretch of text between matches), compiled with PCRE2 (UTF + UCP, JIT if available).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qs::tokenizer_detail {

/// The Qwen2/Qwen3 split pattern from their tokenizer.json (also llama.cpp's pre-tokenizer
/// "qwen2"), in Oniguruma syntax as Hugging Face writes it.
inline constexpr std::string_view kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// The GPT-2 pattern Hugging Face's ByteLevel pre-tokenizer applies when its use_regex is true.
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Rewrites a Hugging Face (Oniguruma) pattern for PCRE2: `\s`/`\S` become
/// `\p{White_Space}`/`\P{White_Space}`. Oniguruma's Unicode \s is the White_Space property,
/// while PCRE2's UCP \s also matches U+180E (MONGOLIAN VOWEL SEPARATOR), which is not.
std::string oniguruma_to_pcre2(std::string_view pattern);

class RegexSplitter {
 public:
  /// Compiles `pattern` (Hugging Face syntax, rewritten by oniguruma_to_pcre2). Throws qs::Error
  /// with PCRE2's message and offset when it does not compile.
  explicit RegexSplitter(std::string_view pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  /// Splits valid UTF-8 `text` into pieces (views into `text`) that concatenate back to `text`.
  /// Thread-safe. Throws qs::Error if PCRE2 reports a matching error (e.g. a resource limit).
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace qs::tokenizer_detail
