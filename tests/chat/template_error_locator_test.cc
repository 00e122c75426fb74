// locate_template_error: a chat-template render error is traced to the message and field it
// follows, by re-rendering parts of the conversation. Templates here are small stand-ins for the
// checks real templates make (Mistral / Llama-2 style role alternation with raise_exception, a
// method called on a field of the wrong type, tool-call arguments); the expected locations are
// the fields each case plants.
#include "chat/template_error_locator.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

// Renders `context` (which must fail) and locates the error.
std::optional<TemplateErrorLocation> locate(const ChatTemplate& tmpl, const ojson& context) {
  try {
    tmpl.render(context);
  } catch (const Error& e) {
    return locate_template_error(tmpl, context, e.what());
  }
  ADD_FAILURE() << "the context rendered";
  return std::nullopt;
}

ojson msg(const char* role, const char* content) { return {{"role", role}, {"content", content}}; }

// Role alternation as Mistral's and Llama-2's templates check it.
const char* const kAlternating =
    "{%- for message in messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif %}{{- message['role'] + ': ' + message['content'] + '\\n' }}{%- endfor %}";

TEST(TemplateErrorLocator, RoleOrderRaiseNamesTheMessageRole) {
  const ChatTemplate tmpl(kAlternating);
  for (size_t bad = 1; bad < 7; ++bad) {
    ojson messages = ojson::array();
    for (size_t i = 0; i < 8; ++i) messages.push_back(msg(i % 2 == 0 ? "user" : "assistant", "x"));
    messages[bad]["role"] = bad % 2 == 0 ? "assistant" : "user";  // breaks the alternation at `bad`
    const auto where = locate(tmpl, {{"messages", messages}});
    ASSERT_TRUE(where.has_value()) << bad;
    EXPECT_EQ(where->message_index, bad);
    EXPECT_EQ(where->path, "messages[" + std::to_string(bad) + "].role");
  }
}

TEST(TemplateErrorLocator, WrongTypeFieldIsNamed) {
  // The template strips a string field; a number there fails, and removing it renders.
  const ChatTemplate tmpl(
      "{%- for m in messages %}{{- m.content }}{%- if m.reasoning_content is defined %}"
      "{{- m.reasoning_content.strip() }}{%- endif %}{%- endfor %}");
  ojson messages = {msg("user", "a"), msg("assistant", "b"), msg("user", "c"), msg("assistant", "d")};
  messages[1]["reasoning_content"] = "fine";
  messages[3]["reasoning_content"] = 5;
  const auto where = locate(tmpl, {{"messages", messages}});
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->message_index, 3u);
  EXPECT_EQ(where->path, "messages[3].reasoning_content");
}

TEST(TemplateErrorLocator, ToolCallArgumentsAreNarrowedToTheCallAndField) {
  const ChatTemplate tmpl(
      "{%- for m in messages %}{%- if m.tool_calls %}{%- for c in m.tool_calls %}"
      "{%- if c.function.arguments is defined %}{{- c.function.name + c.function.arguments.upper() }}{%- endif %}"
      "{%- endfor %}{%- endif %}{%- endfor %}");
  const ojson good = {{"id", "c0"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}};
  const ojson bad = {{"id", "c1"}, {"function", {{"name", "g"}, {"arguments", {{"a", 1}}}}}};
  ojson assistant = msg("assistant", "");
  assistant["tool_calls"] = {good, good, bad, good};
  const ojson messages = {msg("user", "q"), assistant, msg("tool", "r")};
  const auto where = locate(tmpl, {{"messages", messages}});
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->message_index, 1u);
  EXPECT_EQ(where->path, "messages[1].tool_calls[2].function.arguments");
}

TEST(TemplateErrorLocator, AnErrorThatNeedsNoMessageHasNoLocation) {
  // Fails before looking at any message: an empty conversation fails the same way.
  const ChatTemplate tmpl("{%- if not tools %}{{- raise_exception('tools are required') }}{%- endif %}"
                          "{%- for m in messages %}{{- m.content }}{%- endfor %}");
  EXPECT_FALSE(locate(tmpl, {{"messages", {msg("user", "a"), msg("assistant", "b")}}}).has_value());
  // No messages at all: nothing to name.
  EXPECT_FALSE(locate_template_error(tmpl, {{"tools", nullptr}}, "chat template: tools are required").has_value());
}

TEST(TemplateErrorLocator, FirstFailingMessageOfSeveralIsNamed) {
  const ChatTemplate tmpl("{%- for m in messages %}{{- m.content.upper() }}{%- endfor %}");
  ojson messages = ojson::array();
  for (int i = 0; i < 40; ++i) messages.push_back(msg("user", "x"));
  messages[17]["content"] = 3;
  messages[30]["content"] = 4;
  const auto where = locate(tmpl, {{"messages", messages}});
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->path, "messages[17].content");
}

}  // namespace
}  // namespace qs
