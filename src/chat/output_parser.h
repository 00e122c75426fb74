// Parsers for Qwen3 model output: reasoning (<think>...</think>) and tool calls
// (<tool_call>{"name": ..., "arguments": ...}</tool_call>), i.e. the formats the Qwen3 chat
// template renders back into prompts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qs::chat {

struct ReasoningSplit {
  /// Text inside the think block, without the newlines Qwen puts right inside the tags.
  std::string reasoning_content;
  /// Everything else; the newlines Qwen puts after </think> are removed.
  std::string content;
  /// True if a think block (opened, closed or both) was found, even an empty one.
  bool has_reasoning = false;
};

/// Splits generated text into reasoning and content.
///  - "<think>\nR\n</think>\n\nC" gives reasoning "R", content "C" (whitespace before <think> is
///    dropped, up to 4 bytes of it; other text before it, or more whitespace, stays content).
///  - "R\n</think>\n\nC" (the prompt already opened <think>) gives the same.
///  - "<think>\nR" (cut off while thinking) gives reasoning "R", content "".
///  - Text without tags is all content, unless `think_opened_in_prompt`, in which case text up to
///    the first </think> (or all of it) is reasoning.
/// Only the first </think> ends the reasoning; tags after it are ordinary content. Reasoning loses
/// leading and trailing '\n' (the template's reasoning_content.strip('\n')), content after
/// </think> loses leading '\n' (content.lstrip('\n')).
ReasoningSplit split_reasoning(std::string_view text, bool think_opened_in_prompt = false);

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

/// Streaming counterpart of split_reasoning: push text deltas as they are generated and get the
/// reasoning/content increments. It holds back only what could still be the start of a tag (and,
/// inside reasoning, newlines that might turn out to precede </think>), so concatenating every
/// delta plus flush() equals split_reasoning of the whole text. One exception: text with a
/// </think> but no <think> is recognized as reasoning only with `think_opened_in_prompt` (a stream
/// cannot take back content it has already emitted); without it, text before that </think> is
/// content and the tag is dropped.
class ReasoningStreamSplitter {
 public:
  explicit ReasoningStreamSplitter(bool think_opened_in_prompt = false);

  /// Consumes the next piece of generated text.
  ReasoningDelta push(std::string_view delta);
  /// Emits whatever is still held back; call once at the end of generation.
  ReasoningDelta flush();
  /// True once a think block has been seen (or was opened by the prompt).
  bool has_reasoning() const { return has_reasoning_; }

 private:
  enum class State { kDetect, kPreContent, kReasoning, kContent };

  bool step(ReasoningDelta& out);
  bool step_detect();
  bool step_pre_content(ReasoningDelta& out);
  bool step_reasoning(ReasoningDelta& out);
  void emit_reasoning(std::string_view text, ReasoningDelta& out);
  void emit_content(std::string_view text, ReasoningDelta& out);

  State state_;
  std::string pending_;
  bool has_reasoning_ = false;
  bool reasoning_started_ = false;       // reasoning text has been emitted (leading '\n' dropped)
  bool strip_content_newlines_ = false;  // still dropping '\n' right after </think>
};

struct ToolCall {
  std::string name;
  /// The arguments as JSON text: an object with ", " and ": " separators (Python's json.dumps
  /// default, key order kept; strings and numbers as the model wrote them when the body starts
  /// {"name": .., "arguments": {, see tool_call_stream.h), or the model's string verbatim if it
  /// gave a string.
  std::string arguments;
};

struct ToolCallParse {
  /// The text outside the tool-call blocks; whitespace adjoining a removed block is dropped.
  std::string content;
  std::vector<ToolCall> tool_calls;
};

/// Extracts Qwen's `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` blocks, in
/// order. A block whose body is not a JSON object with a string "name" and an object or string
/// "arguments" (or "parameters", or neither: "{}") stays in the content verbatim, as does a block
/// without </tool_call>.
ToolCallParse parse_tool_calls(std::string_view text);

}  // namespace qs::chat
