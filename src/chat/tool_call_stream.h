// Streaming parser for Qwen3 tool calls: turns generated text into content deltas and OpenAI
// tool-call deltas as the text arrives (the first delta of a call carries its index and name,
// later ones argument fragments), with no raw <tool_call> text in the content.
//
// Arguments are the model's JSON object text with whitespace outside strings dropped and the
// separators ", " / ": " (Python json.dumps' defaults); strings and numbers stay as the model
// wrote them. parse_tool_calls (output_parser.h) produces the same text for a finished call, so
// the concatenated fragments of a streamed call equal the non-streamed call's arguments.
//
// A block whose body does not start `{"name": "N", "arguments": {` (e.g. arguments as a string,
// "parameters", other key order) is held until </tool_call> and then sent whole (one delta with
// name and arguments, as parse_tool_calls reads it) or, if it is not a valid call, as content.
// A block cut off before </tool_call> keeps what was already sent. Arguments that turn out not
// to be valid JSON after the name was sent stay a call (the non-streamed parse keeps such a
// block as content); constrained tool calls (tool_choice required / named) are always valid.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qs::chat {

/// Rewrites JSON text with whitespace outside strings removed and ", " / ": " separators.
/// Feed it any split of the text; it tracks strings, escapes and nesting depth.
class JsonSeparatorNormalizer {
 public:
  /// Appends the normalized form of `text` to `out`; stops right after the value that started
  /// at depth 0 closes and returns how many bytes of `text` were consumed (text.size() if the
  /// value is still open).
  size_t push(std::string_view text, std::string& out);
  bool done() const { return done_; }

 private:
  bool in_string_ = false;
  bool escape_ = false;
  int depth_ = 0;
  bool started_ = false;
  bool done_ = false;
};

struct CallHeader {
  std::string name;
  size_t arguments_at = 0;  // offset of the arguments object's '{' in the body
};

/// Matches `\s*{\s*"name"\s*:\s*"N"\s*,\s*"arguments"\s*:\s*{` at the start of a <tool_call>
/// body; nullopt when the body does not (yet) start so.
std::optional<CallHeader> match_call_header(std::string_view body);

struct ToolCallDelta {
  int index = 0;             // position of the call in the response
  bool first = false;        // the first delta of this call: carries the name
  std::string name;
  std::string arguments;     // fragment (may be empty on the first delta)
};

struct ToolStreamOutput {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class ToolCallStreamParser {
 public:
  ToolStreamOutput push(std::string_view text);
  /// Emits what is still held back; call once at the end of the generation.
  ToolStreamOutput flush();
  int n_calls() const { return n_calls_; }

 private:
  enum class State { kText, kHeader, kArgs, kTail };
  void step(ToolStreamOutput& out, bool final);
  void emit_content(std::string_view text, ToolStreamOutput& out);

  State state_ = State::kText;
  std::string pending_;  // text not yet consumed
  std::string body_;     // kHeader: the block body so far
  std::string dropped_space_;  // whitespace before the open tag (restored if the block is not a call)
  bool strip_leading_ = false;
  int n_calls_ = 0;
  JsonSeparatorNormalizer args_;
};

}  // namespace qs::chat
