// Output parsers: <think> splitting (whole and streamed) and <tool_call> extraction, against
// hand-written expectations.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/output_parser.h"

namespace qs::chat {
namespace {

struct SplitCase {
  const char* text;
  bool opened;
  const char* reasoning;
  const char* content;
  bool has_reasoning;
};

const SplitCase kSplitCases[] = {
    {"<think>\nStep one.\nStep two.\n</think>\n\nThe answer is 4.", false, "Step one.\nStep two.",
     "The answer is 4.", true},
    {"Step one.\n</think>\n\nThe answer is 4.", false, "Step one.", "The answer is 4.", true},
    {"Step one.\n</think>\n\nThe answer is 4.", true, "Step one.", "The answer is 4.", true},
    {"<think>\n\n</think>\n\nHello", false, "", "Hello", true},
    {"Just an answer.", false, "", "Just an answer.", false},
    {"\n\nJust an answer.\n", false, "", "\n\nJust an answer.\n", false},
    {"still thinking", true, "still thinking", "", true},
    {"<think>\ncut off mid-thou", false, "cut off mid-thou", "", true},
    {"  \n<think>x</think>y", false, "x", "y", true},
    {"Prefix <think>r</think>\n\nc", false, "r", "Prefix c", true},
    {"<think>a</think>b</think>c<think>d", false, "a", "b</think>c<think>d", true},
    {"<think>\n  indented reasoning  \n</think>\n\n  spaced content  ", false,
     "  indented reasoning  ", "  spaced content  ", true},
    {"", false, "", "", false},
    {"", true, "", "", true},
    {"<thinking>not a tag</thinking>", false, "", "<thinking>not a tag</thinking>", false},
    {"<think>\n思考 🤔\n</think>\n\n答案", false, "思考 🤔", "答案", true},
    // Whitespace before <think> is dropped up to 4 bytes; more of it is content.
    {"\n\n\n\n<think>r</think>c", false, "r", "c", true},
    {"\n\n\n\n\n<think>r</think>c", false, "r", "\n\n\n\n\nc", true},
    {"\n\n\n\n\n\n\n\n", false, "", "\n\n\n\n\n\n\n\n", false},
};

TEST(ChatOutputParser, SplitReasoning) {
  for (const SplitCase& c : kSplitCases) {
    SCOPED_TRACE(std::string(c.text) + (c.opened ? " (opened)" : ""));
    const ReasoningSplit split = split_reasoning(c.text, c.opened);
    EXPECT_EQ(split.reasoning_content, c.reasoning);
    EXPECT_EQ(split.content, c.content);
    EXPECT_EQ(split.has_reasoning, c.has_reasoning);
  }
}

// Streams `text` in pieces of `chunk` bytes and concatenates the deltas.
ReasoningDelta stream(const std::string& text, size_t chunk, bool opened) {
  ReasoningStreamSplitter splitter(opened);
  ReasoningDelta total;
  for (size_t i = 0; i < text.size(); i += chunk) {
    const ReasoningDelta d = splitter.push(std::string_view(text).substr(i, chunk));
    total.reasoning += d.reasoning;
    total.content += d.content;
  }
  const ReasoningDelta rest = splitter.flush();
  total.reasoning += rest.reasoning;
  total.content += rest.content;
  return total;
}

TEST(ChatOutputParser, StreamingMatchesWholeSplitForEveryChunking) {
  for (const SplitCase& c : kSplitCases) {
    // Without the prompt flag a bare </think> cannot be recognized after content went out.
    const std::string text = c.text;
    const bool bare_close =
        text.find("</think>") != std::string::npos &&
        (text.find("<think>") == std::string::npos || text.find("<think>") > text.find("</think>"));
    if (bare_close && !c.opened) continue;
    for (size_t chunk = 1; chunk <= text.size() + 1; ++chunk) {
      SCOPED_TRACE(text + " chunk=" + std::to_string(chunk));
      const ReasoningDelta got = stream(text, chunk, c.opened);
      EXPECT_EQ(got.reasoning, c.reasoning);
      EXPECT_EQ(got.content, c.content);
    }
  }
}

TEST(ChatOutputParser, StreamingHoldsBackOnlyPartialTags) {
  ReasoningStreamSplitter splitter;
  ReasoningDelta d = splitter.push("<thi");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "");
  d = splitter.push("nk>\nWorking on it");
  EXPECT_EQ(d.reasoning, "Working on it");
  EXPECT_TRUE(splitter.has_reasoning());
  d = splitter.push(" still\n</th");
  EXPECT_EQ(d.reasoning, " still");  // "\n</th" may be the closing tag
  d = splitter.push("ink>\n\nDone");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Done");
  d = splitter.push(" </think> <think> literal");
  EXPECT_EQ(d.content, " </think> <think> literal");
  d = splitter.flush();
  EXPECT_EQ(d.content, "");
}

// An output of whitespace alone streams once it is too long to be dropped before a <think>
// (it was held to the end: the client saw every token in the last chunk).
TEST(ChatOutputParser, StreamingReleasesLongLeadingWhitespace) {
  ReasoningStreamSplitter splitter;
  std::string seen;
  for (int i = 0; i < 4; ++i) seen += splitter.push("\n").content;
  EXPECT_EQ(seen, "") << "4 newlines may still precede <think>";
  seen += splitter.push("\n").content;
  EXPECT_EQ(seen, std::string(5, '\n'));
  EXPECT_EQ(splitter.push("\n").content, "\n");
  EXPECT_FALSE(splitter.has_reasoning());
}

TEST(ChatOutputParser, StreamingPlainContentPassesThrough) {
  ReasoningStreamSplitter splitter;
  EXPECT_EQ(splitter.push("Hello").content, "Hello");
  EXPECT_EQ(splitter.push(" <b>").content, " <b>");  // not a prefix of a think tag
  EXPECT_EQ(splitter.push(" a <").content, " a ");
  EXPECT_EQ(splitter.push("x").content, "<x");
  EXPECT_FALSE(splitter.has_reasoning());
}

TEST(ChatOutputParser, StreamingBareCloseWithoutPromptFlagEndsAsContent) {
  const ReasoningDelta got = stream("thoughts\n</think>\n\nanswer", 3, false);
  EXPECT_EQ(got.reasoning, "");
  EXPECT_EQ(got.content, "thoughts\nanswer");
}

TEST(ChatOutputParser, ParsesQwenToolCalls) {
  const ToolCallParse parsed = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"celsius\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\", \"opts\": {\"b\": "
      "[1, 2.5, true, null], \"a\": \"ü\"}}}\n</tool_call>");
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  EXPECT_EQ(parsed.tool_calls[0].name, "get_weather");
  EXPECT_EQ(parsed.tool_calls[0].arguments, "{\"city\": \"Paris\", \"unit\": \"celsius\"}");
  EXPECT_EQ(parsed.tool_calls[1].name, "get_time");
  EXPECT_EQ(parsed.tool_calls[1].arguments,
            "{\"zone\": \"CET\", \"opts\": {\"b\": [1, 2.5, true, null], \"a\": \"ü\"}}");
  EXPECT_EQ(parsed.content, "Let me check.");
}

TEST(ChatOutputParser, ToolCallArgumentVariants) {
  ToolCallParse parsed = parse_tool_calls(
      "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>");
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].arguments, "{\"x\": 1}");
  parsed = parse_tool_calls("<tool_call>{\"name\": \"f\"}</tool_call>");
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].arguments, "{}");
  parsed =
      parse_tool_calls("<tool_call>{\"name\": \"f\", \"parameters\": {\"y\": \"z\"}}</tool_call>");
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].arguments, "{\"y\": \"z\"}");
  EXPECT_EQ(parsed.content, "");
}

TEST(ChatOutputParser, MalformedToolCallsStayContent) {
  const std::string bad_json =
      "Before <tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call> after";
  ToolCallParse parsed = parse_tool_calls(bad_json);
  EXPECT_TRUE(parsed.tool_calls.empty());
  EXPECT_EQ(parsed.content, bad_json);

  const std::string no_name = "<tool_call>{\"arguments\": {}}</tool_call>";
  EXPECT_EQ(parse_tool_calls(no_name).content, no_name);
  const std::string array_args = "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>";
  EXPECT_EQ(parse_tool_calls(array_args).content, array_args);
  const std::string unclosed = "text <tool_call>\n{\"name\": \"f\", \"arguments\": {}}";
  parsed = parse_tool_calls(unclosed);
  EXPECT_TRUE(parsed.tool_calls.empty());
  EXPECT_EQ(parsed.content, unclosed);

  parsed = parse_tool_calls(
      "<tool_call>nope</tool_call>\n<tool_call>{\"name\": \"ok\", \"arguments\": "
      "{}}</tool_call>\nTail");
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].name, "ok");
  EXPECT_EQ(parsed.content, "<tool_call>nope</tool_call>Tail");
}

TEST(ChatOutputParser, TextWithoutToolCallsIsUnchanged) {
  const std::string text = "  plain answer with </tool_call> and <tool_call mentions\n";
  const ToolCallParse parsed = parse_tool_calls(text);
  EXPECT_TRUE(parsed.tool_calls.empty());
  EXPECT_EQ(parsed.content, text);
}

TEST(ChatOutputParser, ReasoningThenToolCalls) {
  const ReasoningSplit split = split_reasoning(
      "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Oslo\"}}\n</tool_call>");
  EXPECT_EQ(split.reasoning_content, "Need weather.");
  const ToolCallParse parsed = parse_tool_calls(split.content);
  ASSERT_EQ(parsed.tool_calls.size(), 1u);
  EXPECT_EQ(parsed.tool_calls[0].arguments, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(parsed.content, "");
}

}  // namespace
}  // namespace qs::chat
