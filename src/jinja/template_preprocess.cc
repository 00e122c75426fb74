#include "jinja/template_preprocess.h"

#include "jinja/template_text.h"

namespace qs::chat {
namespace {

MappedText map_lines(std::string_view source) {
  MappedText out;
  out.text = source;
  int line = 1;
  for (char c : source) {
    out.lines.push_back(line);
    if (c == '\n') ++line;
  }
  return out;
}

bool is_line_terminator_at(const std::string& s, size_t pos, size_t& length) {
  length = s[pos] == '\n' || s[pos] == '\r' ? 1 : 0;
  if (s.compare(pos, 3, "\xE2\x80\xA8") == 0 || s.compare(pos, 3, "\xE2\x80\xA9") == 0) length = 3;
  return length > 0;
}

// lstrip_blocks: drop spaces and tabs between a line start and `{#`, `{%` or `{-`.
MappedText lstrip_blocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  bool line_start = true;
  for (size_t i = 0; i < s.size();) {
    if (line_start) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      const bool block = j + 1 < s.size() && s[j] == '{' &&
                         (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-');
      if (block) i = j;
    }
    size_t terminator = 0;
    line_start = is_line_terminator_at(s, i, terminator);
    const size_t next = line_start ? i + terminator : i + 1;
    out.append(in, i, next);
    i = next;
  }
  return out;
}

// trim_blocks: drop the newline right after `#}`, `%}` or `-}`.
MappedText trim_blocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool closer = (s[i] == '#' || s[i] == '%' || s[i] == '-') && i + 2 < s.size() &&
                        s[i + 1] == '}' && s[i + 2] == '\n';
    out.append(in, i, closer ? i + 2 : i + 1);
    if (closer) i += 2;
  }
  return out;
}

// If a {% generation %} / {% endgeneration %} tag starts at `i`, returns the end of the tag and
// its strip flags.
bool match_generation_tag(const std::string& s, size_t i, size_t& end, bool& lstrip, bool& rstrip) {
  if (s.compare(i, 2, "{%") != 0) return false;
  size_t p = i + 2;
  lstrip = p < s.size() && s[p] == '-';
  if (lstrip) ++p;
  p += text::space_run(s, p);
  if (s.compare(p, 13, "endgeneration") == 0) {
    p += 13;
  } else if (s.compare(p, 10, "generation") == 0) {
    p += 10;
  } else {
    return false;
  }
  p += text::space_run(s, p);
  rstrip = p < s.size() && s[p] == '-';
  if (rstrip) ++p;
  if (s.compare(p, 2, "%}") != 0) return false;
  end = p + 2;
  return true;
}

// Removes transformers' {% generation %} markers with the whitespace rules of the reference:
// the whitespace around the tag is kept unless the tag strips it with `-`.
MappedText strip_generation_tags(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t copied = 0;
  size_t run_start = std::string::npos;
  for (size_t i = 0; i < s.size();) {
    size_t tag_end = 0;
    bool lstrip = false;
    bool rstrip = false;
    if (match_generation_tag(s, i, tag_end, lstrip, rstrip)) {
      const size_t before = run_start == std::string::npos ? i : run_start;
      const size_t after = tag_end + text::space_run(s, tag_end);
      out.append(in, copied, before);
      if (!lstrip) out.append(in, before, i);
      if (!rstrip) out.append(in, tag_end, after);
      copied = i = after;
      run_start = std::string::npos;
      continue;
    }
    size_t next = i;
    if (text::is_js_space(text::decode_utf8(s, next))) {
      if (run_start == std::string::npos) run_start = i;
    } else {
      run_start = std::string::npos;
    }
    i = next;
  }
  out.append(in, copied, s.size());
  return out;
}

}  // namespace

MappedText preprocess(std::string_view source) {
  MappedText text = map_lines(source);
  if (!text.text.empty() && text.text.back() == '\n') {
    text.text.pop_back();
    text.lines.pop_back();
  }
  return strip_generation_tags(trim_blocks(lstrip_blocks(text)));
}

}  // namespace qs::chat
