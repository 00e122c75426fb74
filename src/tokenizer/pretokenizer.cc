#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "core/error.h"

namespace qs::tokenizer_detail {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// Length in bytes of the UTF-8 character starting with lead byte `b`.
size_t utf8_char_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xF0) return 4;
  if (b >= 0xE0) return 3;
  return 2;
}

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '\\' || i + 1 == pattern.size()) {
      out.push_back(c);
      continue;
    }
    const char next = pattern[++i];
    if (next == 's') {
      out.append("\\p{White_Space}");
    } else if (next == 'S') {
      out.append("\\P{White_Space}");
    } else {
      out.push_back('\\');
      out.push_back(next);
    }
  }
  return out;
}

RegexSplitter::RegexSplitter(std::string_view pattern) {
  const std::string translated = oniguruma_to_pcre2(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                   translated.size(), PCRE2_UTF | PCRE2_UCP, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    throw Error("tokenizer: pre-tokenizer regex does not compile at offset " +
                std::to_string(error_offset) + ": " + pcre2_message(error_code) + " (pattern " +
                std::string(pattern) + ")");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unsupported
  code_ = code;
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  auto* code = static_cast<pcre2_code*>(code_);
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code, nullptr));
  if (!match) throw Error("tokenizer: out of memory creating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;  // where the next search starts
  size_t emitted = 0;  // end of the last emitted piece
  while (offset < text.size()) {
    // The text was validated once by the caller; re-checking it per match would be quadratic.
    const int rc = pcre2_match(code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK,
                               match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("tokenizer: pre-tokenizer regex failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
    const size_t start = ov[0], end = ov[1];
    if (start > emitted) pieces.push_back(text.substr(emitted, start - emitted));
    if (end > start) {
      pieces.push_back(text.substr(start, end - start));
      emitted = end;
      offset = end;
    } else {  // empty match: step over one character, it stays part of the next gap
      emitted = start;
      offset = start + utf8_char_length(static_cast<unsigned char>(text[start]));
    }
  }
  if (emitted < text.size()) pieces.push_back(text.substr(emitted));
  return pieces;
}

}  // namespace qs::tokenizer_detail
