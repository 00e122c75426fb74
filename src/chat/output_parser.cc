#include "chat/output_parser.h"

#include <nlohmann/json.hpp>

namespace qs::chat {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

std::string trim_newlines(std::string_view s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

std::string_view skip_leading_newlines(std::string_view s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  return s;
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t len = std::min(text.size(), tag.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

}  // namespace

ReasoningSplit split_reasoning(std::string_view text) {
  ReasoningSplit out;
  const size_t close = text.find(kClose);
  if (close == std::string_view::npos) {
    const std::string_view stripped = skip_leading_newlines(text);
    if (stripped.substr(0, kOpen.size()) == kOpen) {  // unterminated reasoning: all reasoning
      out.reasoning_content = trim_newlines(stripped.substr(kOpen.size()));
    } else {
      out.content = std::string(text);
    }
    return out;
  }
  std::string_view reasoning = text.substr(0, close);
  const size_t open = reasoning.find(kOpen);
  if (open != std::string_view::npos) reasoning = reasoning.substr(open + kOpen.size());
  out.reasoning_content = trim_newlines(reasoning);
  out.content = std::string(skip_leading_newlines(text.substr(close + kClose.size())));
  return out;
}

ReasoningDelta ReasoningStreamSplitter::push(std::string_view delta) {
  pending_.append(delta);
  return drain(false);
}

ReasoningDelta ReasoningStreamSplitter::flush() { return drain(true); }

ReasoningDelta ReasoningStreamSplitter::drain(bool final) {
  ReasoningDelta out;
  for (;;) {
    if (!seen_any_) {
      const std::string_view rest = skip_leading_newlines(pending_);
      if (rest.empty() && !final) return out;
      if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest && !final) return out;
      seen_any_ = true;
      if (rest.substr(0, kOpen.size()) == kOpen) {
        in_reasoning_ = true;
        pending_ = std::string(rest.substr(kOpen.size()));
      }
    }
    if (in_reasoning_ || !after_close_) {
      const size_t close = pending_.find(kClose);
      if (close != std::string::npos) {
        out.reasoning += pending_.substr(0, close);
        pending_.erase(0, close + kClose.size());
        in_reasoning_ = false;
        after_close_ = true;
        // Drop the newlines Qwen writes after </think>.
        pending_ = std::string(skip_leading_newlines(pending_));
        continue;
      }
      if (in_reasoning_) {
        const size_t hold = final ? 0 : partial_tag_suffix(pending_, kClose);
        out.reasoning += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return out;
      }
      // Not in reasoning: a bare "</think>" may still come (template opened <think>) only
      // before any content was emitted, so hold a partial tag.
      const size_t hold = final ? 0 : partial_tag_suffix(pending_, kClose);
      out.content += pending_.substr(0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
      return out;
    }
    out.content += pending_;
    pending_.clear();
    return out;
  }
}

ToolCallParse parse_tool_calls(std::string_view text) {
  constexpr std::string_view kStart = "<tool_call>";
  constexpr std::string_view kEnd = "</tool_call>";
  ToolCallParse out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find(kStart, pos);
    if (start == std::string_view::npos) break;
    const size_t end = text.find(kEnd, start + kStart.size());
    if (end == std::string_view::npos) break;
    const std::string_view body = text.substr(start + kStart.size(), end - start - kStart.size());
    ToolCall call;
    bool ok = false;
    try {
      const auto j = nlohmann::json::parse(body);
      if (j.is_object() && j.contains("name") && j["name"].is_string()) {
        call.name = j["name"].get<std::string>();
        const auto& args = j.contains("arguments") ? j["arguments"] : nlohmann::json::object();
        call.arguments = args.is_string() ? args.get<std::string>() : args.dump();
        ok = true;
      }
    } catch (const nlohmann::json::exception&) {
      ok = false;
    }
    if (ok) {
      out.content.append(text.substr(pos, start - pos));
      out.tool_calls.push_back(std::move(call));
    } else {
      out.content.append(text.substr(pos, end + kEnd.size() - pos));
    }
    pos = end + kEnd.size();
  }
  out.content.append(text.substr(std::min(pos, text.size())));
  if (!out.tool_calls.empty()) out.content = trim_newlines(out.content);
  return out;
}

}  // namespace qs::chat
