// Parsers for Qwen3 model output: reasoning (<think>...</think>) and tool calls.
// (Header reconstructed to match output_parser.cc after an accidental overwrite.)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qs::chat {

struct ReasoningSplit {
  std::string reasoning_content;
  std::string content;
};

ReasoningSplit split_reasoning(std::string_view text);

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningStreamSplitter {
 public:
  ReasoningDelta push(std::string_view delta);
  ReasoningDelta flush();

 private:
  ReasoningDelta drain(bool final);

  std::string pending_;
  bool seen_any_ = false;
  bool in_reasoning_ = false;
  bool after_close_ = false;
};

struct ToolCall {
  std::string name;
  std::string arguments;
};

struct ToolCallParse {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

ToolCallParse parse_tool_calls(std::string_view text);

}  // namespace qs::chat
