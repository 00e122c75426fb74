// Template preprocessing, as @huggingface/jinja does it before tokenizing: drop one trailing
// newline, lstrip_blocks (spaces/tabs before `{%`, `{#`, `{-` at a line start), trim_blocks (the
// newline after `%}`, `#}`, `-}`) and removal of transformers' {% generation %} markers. Works on
// text that remembers each byte's original line, so later errors still name source lines.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qs::chat {

/// Template text plus, for every byte, the 1-based line it came from in the original source.
struct MappedText {
  std::string text;
  std::vector<int> lines;

  void append(const MappedText& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    lines.insert(lines.end(), from.lines.begin() + static_cast<long>(begin),
                 from.lines.begin() + static_cast<long>(end));
  }
};

/// Applies the reference's preprocessing to `source`.
MappedText preprocess(std::string_view source);

}  // namespace qs::chat
