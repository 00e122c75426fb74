// Streaming tool-call parser: for every way of splitting a generation into deltas, the content
// deltas concatenate to parse_tool_calls' content, each call's first delta carries its name and
// the argument fragments concatenate to parse_tool_calls' arguments (the non-streamed response),
// which parse to the same JSON value as the model's text (nlohmann as the reference).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "chat/tool_call_stream.h"

namespace qs::chat {
namespace {

struct Streamed {
  std::string content;
  std::vector<ToolCall> calls;
};

Streamed stream_in_pieces(std::string_view text, size_t piece) {
  ToolCallStreamParser parser;
  Streamed s;
  auto take = [&](ToolStreamOutput out) {
    s.content += out.content;
    for (const ToolCallDelta& d : out.calls) {
      if (d.first) {
        ASSERT_EQ(static_cast<size_t>(d.index), s.calls.size()) << "calls start in order";
        s.calls.push_back({d.name, ""});
      } else {
        ASSERT_EQ(static_cast<size_t>(d.index) + 1, s.calls.size()) << "fragments follow their call's start";
      }
      s.calls.back().arguments += d.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += piece) take(parser.push(text.substr(i, piece)));
  take(parser.flush());
  return s;
}

const std::vector<std::string> kTexts = {
    "plain text without calls",
    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
    "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":[1, 2 ,{\"c\" :\"x, y: }\\\"z\"}]}}\n</tool_call>\n"
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call> tail text",
    "<tool_call>{\"arguments\": {\"y\": 2}, \"name\": \"g\"}</tool_call>",
    "<tool_call>\n{\"name\": \"f\\u00e9\", \"arguments\": {\"s\": \"caf\\u00e9 \\n\", \"n\": -1.50e3}}\n</tool_call>",
    "text <tool_call> partial <tool_ca",
};

TEST(ToolCallStream, DeltasConcatenateToTheWholeParseForEverySplit) {
  for (const std::string& text : kTexts) {
    const ToolCallParse whole = parse_tool_calls(text);
    for (size_t piece : {1, 2, 3, 5, 7, 1000}) {
      const Streamed s = stream_in_pieces(text, piece);
      ASSERT_EQ(s.calls.size(), whole.tool_calls.size()) << text << " piece " << piece;
      for (size_t i = 0; i < s.calls.size(); ++i) {
        EXPECT_EQ(s.calls[i].name, whole.tool_calls[i].name) << text;
        EXPECT_EQ(s.calls[i].arguments, whole.tool_calls[i].arguments) << text << " piece " << piece;
      }
      EXPECT_EQ(s.content, whole.content) << text << " piece " << piece;
      EXPECT_EQ(s.content.find("<tool_call>\n{\"name\": \"get"), std::string::npos);
    }
  }
}

TEST(ToolCallStream, ArgumentsKeepTheModelsValues) {
  const std::string args = R"({ "a" : 1.50e3, "s": "x, y: \"q\" \u00e9", "l": [ true , null ] })";
  const ToolCallParse p = parse_tool_calls("<tool_call>\n{\"name\": \"f\", \"arguments\": " + args + "}\n</tool_call>");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(p.tool_calls[0].arguments), nlohmann::json::parse(args));
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"a": 1.50e3, "s": "x, y: \"q\" \u00e9", "l": [true, null]})");
  EXPECT_EQ(p.content, "");
}

TEST(ToolCallStream, NameComesBeforeTheArgumentsAreComplete) {
  ToolCallStreamParser parser;
  ToolStreamOutput a = parser.push("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_TRUE(a.calls[0].first);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[1].arguments, "{\"city\": \"Pa");
  EXPECT_EQ(a.content, "");
  ToolStreamOutput b = parser.push("ris\"}}\n</tool_call>");
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].arguments, "ris\"}");
  EXPECT_EQ(parser.n_calls(), 1);
}

}  // namespace
}  // namespace qs::chat
