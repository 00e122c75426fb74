#include "chat/output_parser.h"

#include "chat/tool_call_stream.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

namespace qs::chat {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
// Whitespace before an opening <think> is dropped only up to this many bytes (Qwen3 opens its
// reasoning at once): a stream must hold leading whitespace until it knows, and an output of
// whitespace alone would otherwise be held to its end (no TTFT, one chunk at the end).
constexpr size_t kMaxDroppedLeadingSpaces = 4;
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view strip_newlines(std::string_view s, bool left, bool right) {
  while (left && !s.empty() && s.front() == '\n') s.remove_prefix(1);
  while (right && !s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

size_t leading_spaces(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && is_space(s[n])) ++n;
  return n;
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_length(std::string_view text, std::string_view tag) {
  for (size_t len = std::min(text.size(), tag.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == tag.substr(0, len)) return len;
  }
  return 0;
}

// JSON text with Python json.dumps' default separators (", " and ": "), keys in input order.
void dump_python_style(const nlohmann::ordered_json& value, std::string& out) {
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += nlohmann::ordered_json(key).dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace);
      out += ": ";
      dump_python_style(item, out);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      dump_python_style(value[i], out);
    }
    out += ']';
  } else {
    out += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

// The tool call a <tool_call> body describes, or nullopt if it is not a valid one.
std::optional<ToolCall> parse_call_body(std::string_view body) {
  const auto json = nlohmann::ordered_json::parse(body.begin(), body.end(), nullptr, false);
  if (json.is_discarded() || !json.is_object()) return std::nullopt;
  const auto name = json.find("name");
  if (name == json.end() || !name->is_string()) return std::nullopt;
  auto args = json.find("arguments");
  if (args == json.end()) args = json.find("parameters");
  ToolCall call;
  call.name = name->get<std::string>();
  if (args == json.end()) {
    call.arguments = "{}";
  } else if (args->is_string()) {
    call.arguments = args->get<std::string>();
  } else if (args->is_object()) {
    // The model's own text (normalized separators) when the body has the usual shape, so that a
    // streamed call (tool_call_stream.h) and this one have the same arguments text.
    if (auto header = match_call_header(body)) {
      JsonSeparatorNormalizer normalizer;
      normalizer.push(body.substr(header->arguments_at), call.arguments);
    } else {
      dump_python_style(*args, call.arguments);
    }
  } else {
    return std::nullopt;
  }
  return call;
}

}  // namespace

ReasoningSplit split_reasoning(std::string_view text, bool think_opened_in_prompt) {
  ReasoningSplit out;
  std::string_view prefix;
  size_t start = 0;
  if (!think_opened_in_prompt) {
    const size_t open = text.find(kThinkOpen);
    const size_t close = text.find(kThinkClose);
    if (open != std::string_view::npos && (close == std::string_view::npos || open < close)) {
      if (leading_spaces(text) < open || open > kMaxDroppedLeadingSpaces) prefix = text.substr(0, open);
      start = open + kThinkOpen.size();
    } else if (close == std::string_view::npos) {
      out.content = std::string(text);
      return out;
    }
  }
  out.has_reasoning = true;
  const size_t close = text.find(kThinkClose, start);
  const std::string_view reasoning =
      text.substr(start, close == std::string_view::npos ? std::string_view::npos : close - start);
  out.reasoning_content = std::string(strip_newlines(reasoning, true, true));
  out.content = std::string(prefix);
  if (close != std::string_view::npos)
    out.content += strip_newlines(text.substr(close + kThinkClose.size()), true, false);
  return out;
}

ReasoningStreamSplitter::ReasoningStreamSplitter(bool think_opened_in_prompt)
    : state_(think_opened_in_prompt ? State::kReasoning : State::kDetect),
      has_reasoning_(think_opened_in_prompt) {}

ReasoningDelta ReasoningStreamSplitter::push(std::string_view delta) {
  pending_.append(delta);
  ReasoningDelta out;
  while (step(out)) {
  }
  return out;
}

ReasoningDelta ReasoningStreamSplitter::flush() {
  ReasoningDelta out;
  if (state_ == State::kReasoning) {
    emit_reasoning(strip_newlines(pending_, false, true), out);
  } else {
    emit_content(pending_, out);
  }
  pending_.clear();
  return out;
}

// Processes pending_ in the current state; true if the state changed and there may be more to do.
bool ReasoningStreamSplitter::step(ReasoningDelta& out) {
  switch (state_) {
    case State::kDetect: return step_detect();
    case State::kPreContent: return step_pre_content(out);
    case State::kReasoning: return step_reasoning(out);
    case State::kContent:
      emit_content(pending_, out);
      pending_.clear();
      return false;
  }
  return false;
}

// At the start of the output: whitespace then <think> opens reasoning; anything else is content.
bool ReasoningStreamSplitter::step_detect() {
  const size_t spaces = leading_spaces(pending_);
  const std::string_view rest = std::string_view(pending_).substr(spaces);
  if (spaces > kMaxDroppedLeadingSpaces) {  // too much to drop: content (still watched for tags)
    state_ = State::kPreContent;
    return true;
  }
  if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
    pending_.erase(0, spaces + kThinkOpen.size());
    state_ = State::kReasoning;
    has_reasoning_ = true;
    return true;
  }
  if (rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest) return false;
  state_ = State::kPreContent;
  return true;
}

// Content before any think tag: watch for <think> (reasoning starts) and a bare </think>.
bool ReasoningStreamSplitter::step_pre_content(ReasoningDelta& out) {
  const size_t open = pending_.find(kThinkOpen);
  const size_t close = pending_.find(kThinkClose);
  if (open != std::string::npos && (close == std::string::npos || open < close)) {
    emit_content(std::string_view(pending_).substr(0, open), out);
    pending_.erase(0, open + kThinkOpen.size());
    state_ = State::kReasoning;
    has_reasoning_ = true;
    return true;
  }
  if (close != std::string::npos) {
    emit_content(std::string_view(pending_).substr(0, close), out);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::kContent;
    has_reasoning_ = true;
    strip_content_newlines_ = true;
    return true;
  }
  const size_t hold =
      std::max(partial_tag_length(pending_, kThinkOpen), partial_tag_length(pending_, kThinkClose));
  emit_content(std::string_view(pending_).substr(0, pending_.size() - hold), out);
  pending_.erase(0, pending_.size() - hold);
  return false;
}

// Inside reasoning: emit up to </think>, holding back a partial tag and the newlines before it.
bool ReasoningStreamSplitter::step_reasoning(ReasoningDelta& out) {
  const size_t close = pending_.find(kThinkClose);
  if (close != std::string::npos) {
    emit_reasoning(strip_newlines(std::string_view(pending_).substr(0, close), false, true), out);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::kContent;
    strip_content_newlines_ = true;
    return true;
  }
  size_t keep = pending_.size() - partial_tag_length(pending_, kThinkClose);
  while (keep > 0 && pending_[keep - 1] == '\n') --keep;
  emit_reasoning(std::string_view(pending_).substr(0, keep), out);
  pending_.erase(0, keep);
  return false;
}

void ReasoningStreamSplitter::emit_reasoning(std::string_view text, ReasoningDelta& out) {
  if (!reasoning_started_) text = strip_newlines(text, true, false);
  if (text.empty()) return;
  reasoning_started_ = true;
  out.reasoning += text;
}

void ReasoningStreamSplitter::emit_content(std::string_view text, ReasoningDelta& out) {
  if (strip_content_newlines_) text = strip_newlines(text, true, false);
  if (text.empty()) return;
  strip_content_newlines_ = false;
  out.content += text;
}

ToolCallParse parse_tool_calls(std::string_view text) {
  ToolCallParse out;
  size_t pos = 0;
  bool after_block = false;
  const auto append_text = [&](std::string_view piece) {
    if (after_block) piece.remove_prefix(leading_spaces(piece));
    out.content += piece;
  };
  while (true) {
    const size_t start = text.find(kCallOpen, pos);
    if (start == std::string_view::npos) break;
    const size_t end = text.find(kCallClose, start + kCallOpen.size());
    if (end == std::string_view::npos) break;
    const size_t block_end = end + kCallClose.size();
    auto call =
        parse_call_body(text.substr(start + kCallOpen.size(), end - start - kCallOpen.size()));
    if (!call) {
      append_text(text.substr(pos, block_end - pos));
      after_block = false;
    } else {
      append_text(text.substr(pos, start - pos));
      while (!out.content.empty() && is_space(out.content.back())) out.content.pop_back();
      out.tool_calls.push_back(std::move(*call));
      after_block = true;
    }
    pos = block_end;
  }
  append_text(text.substr(pos));
  return out;
}

}  // namespace qs::chat
