#include "chat/tool_call_stream.h"

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"

namespace qs::chat {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t len = std::min(text.size(), tag.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

bool expect(std::string_view s, size_t& i, std::string_view lit) {
  i = skip_spaces(s, i);
  if (s.substr(i, lit.size()) != lit) return false;
  i += lit.size();
  return true;
}

}  // namespace

size_t JsonSeparatorNormalizer::push(std::string_view text, std::string& out) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (done_) return i;
    const char c = text[i];
    if (in_string_) {
      out += c;
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 0) done_ = true;
      }
      continue;
    }
    if (is_space(c)) continue;
    started_ = true;
    switch (c) {
      case '"': in_string_ = true; out += c; break;
      case ',': out += ", "; break;
      case ':': out += ": "; break;
      case '{': case '[': ++depth_; out += c; break;
      case '}': case ']':
        --depth_;
        out += c;
        if (depth_ <= 0) done_ = true;
        break;
      default: out += c;
    }
  }
  return text.size();
}

std::optional<CallHeader> match_call_header(std::string_view body) {
  size_t i = 0;
  if (!expect(body, i, "{") || !expect(body, i, "\"name\"") || !expect(body, i, ":")) return std::nullopt;
  i = skip_spaces(body, i);
  if (i >= body.size() || body[i] != '"') return std::nullopt;
  const size_t name_start = i;
  ++i;
  bool escape = false;
  for (; i < body.size(); ++i) {
    if (escape) { escape = false; continue; }
    if (body[i] == '\\') { escape = true; continue; }
    if (body[i] == '"') break;
  }
  if (i >= body.size()) return std::nullopt;
  ++i;
  const auto name = nlohmann::json::parse(body.substr(name_start, i - name_start), nullptr, false);
  if (!name.is_string()) return std::nullopt;
  if (!expect(body, i, ",") || !expect(body, i, "\"arguments\"") || !expect(body, i, ":")) return std::nullopt;
  i = skip_spaces(body, i);
  if (i >= body.size() || body[i] != '{') return std::nullopt;
  return CallHeader{name.get<std::string>(), i};
}

void ToolCallStreamParser::emit_content(std::string_view text, ToolStreamOutput& out) {
  if (strip_leading_) {
    const size_t n = skip_spaces(text, 0);
    text.remove_prefix(n);
    if (text.empty()) return;
    strip_leading_ = false;
  }
  out.content += text;
}

void ToolCallStreamParser::step(ToolStreamOutput& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::kText: {
        const size_t open = pending_.find(kOpen);
        if (open != std::string::npos) {
          size_t end = open;
          while (end > 0 && is_space(pending_[end - 1])) --end;  // whitespace adjoining a call is dropped
          emit_content(std::string_view(pending_).substr(0, end), out);
          dropped_space_ = pending_.substr(end, open - end);
          pending_.erase(0, open + kOpen.size());
          body_.clear();
          state_ = State::kHeader;
          continue;
        }
        size_t keep = final ? 0 : partial_tag(pending_, kOpen);
        if (!final) {
          while (keep < pending_.size() && is_space(pending_[pending_.size() - keep - 1])) ++keep;
        }
        emit_content(std::string_view(pending_).substr(0, pending_.size() - keep), out);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      case State::kHeader: {
        body_ += pending_;
        pending_.clear();
        if (auto header = match_call_header(body_)) {
          out.calls.push_back({n_calls_, true, header->name, ""});
          args_ = JsonSeparatorNormalizer();
          pending_ = body_.substr(header->arguments_at);
          body_.clear();
          state_ = State::kArgs;
          continue;
        }
        const size_t close = body_.find(kClose);
        if (close != std::string::npos) {
          // Not the streaming shape: the whole block as parse_tool_calls reads it.
          const std::string block = std::string(kOpen) + body_.substr(0, close + kClose.size());
          ToolCallParse parsed = parse_tool_calls(block);
          if (parsed.tool_calls.size() == 1) {
            out.calls.push_back({n_calls_++, true, parsed.tool_calls[0].name, parsed.tool_calls[0].arguments});
            strip_leading_ = true;
          } else {
            emit_content(dropped_space_ + block, out);
          }
          pending_ = body_.substr(close + kClose.size());
          body_.clear();
          state_ = State::kText;
          continue;
        }
        if (final) {
          emit_content(dropped_space_ + std::string(kOpen) + body_, out);  // unclosed: content, as parse_tool_calls
          body_.clear();
        }
        return;
      }
      case State::kArgs: {
        std::string fragment;
        const size_t used = args_.push(pending_, fragment);
        if (!fragment.empty()) out.calls.push_back({n_calls_, false, "", std::move(fragment)});
        pending_.erase(0, used);
        if (!args_.done()) return;
        ++n_calls_;
        state_ = State::kTail;
        continue;
      }
      case State::kTail: {
        const size_t close = pending_.find(kClose);
        if (close == std::string::npos) {
          if (final) pending_.clear();
          return;
        }
        pending_.erase(0, close + kClose.size());
        strip_leading_ = true;
        state_ = State::kText;
        continue;
      }
    }
  }
}

ToolStreamOutput ToolCallStreamParser::push(std::string_view text) {
  ToolStreamOutput out;
  pending_ += text;
  step(out, false);
  return out;
}

ToolStreamOutput ToolCallStreamParser::flush() {
  ToolStreamOutput out;
  step(out, true);
  return out;
}

}  // namespace qs::chat
