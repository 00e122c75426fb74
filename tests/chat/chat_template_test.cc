// ChatTemplate: every (template, conversation) fixture pair renders byte-identically to the
// output @huggingface/jinja produced (tests/fixtures/chat/generate.mjs), syntax errors name the
// line, runtime errors and raise_exception propagate.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace qs {
namespace {

using Json = nlohmann::ordered_json;

std::string fixture_path(const std::string& name) {
  return std::string(QS_FIXTURES_DIR) + "/chat/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Json read_json(const std::string& path) { return Json::parse(read_file(path)); }

// Printable excerpt of `s` around `offset` (control characters escaped).
std::string excerpt(const std::string& s, size_t offset) {
  const size_t begin = offset > 40 ? offset - 40 : 0;
  std::string out;
  for (char c : s.substr(begin, 80)) {
    if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\x" + std::to_string(static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return "\"" + out + "\"";
}

std::string describe_difference(const std::string& expected, const std::string& actual) {
  size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  return "first difference at byte " + std::to_string(i) + " (expected " +
         std::to_string(expected.size()) + " bytes, got " + std::to_string(actual.size()) +
         ")\n  expected: " + excerpt(expected, i) + "\n  actual:   " + excerpt(actual, i);
}

std::string render(const std::string& source, const Json& context = Json::object()) {
  return ChatTemplate(source).render(context);
}

// The qs::Error message `source` raises (parse or render), or "" if it renders.
std::string error_of(const std::string& source, const Json& context = Json::object()) {
  try {
    render(source, context);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Pairs where we deliberately differ from @huggingface/jinja. Our expected output is the
// reference output with `from` replaced by `to`.
struct Divergence {
  const char* template_name;
  const char* conversation;
  const char* from;
  const char* to;
  const char* why;
};
const Divergence kDivergences[] = {
    {"qwen3.jinja", "unicode_spaces", "</think>\n\nline-sep", "</think>\n\n\u2028line-sep",
     "str.lstrip('\\n') strips only newlines (Python); the reference ignores the argument and "
     "trims "
     "all whitespace, here U+2028"},
};

const Divergence* find_divergence(const std::string& name, const std::string& id) {
  for (const Divergence& d : kDivergences) {
    if (name == d.template_name && id == d.conversation) return &d;
  }
  return nullptr;
}

TEST(ChatTemplateFixtures, EveryPairMatchesReference) {
  const Json conversations = read_json(fixture_path("conversations.json"));
  const Json expected = read_json(fixture_path("expected.json"));
  ASSERT_GE(conversations.size(), 60u);
  std::map<std::string, Json> by_id;
  for (const Json& conversation : conversations)
    by_id[conversation.at("id").get<std::string>()] = conversation;
  std::map<std::string, std::unique_ptr<ChatTemplate>> templates;
  size_t compared = 0;
  size_t errors = 0;
  for (const Json& entry : expected.at("cases")) {
    const std::string name = entry.at("template");
    const std::string id = entry.at("conversation");
    SCOPED_TRACE(name + " x " + id);
    auto& tmpl = templates[name];
    if (!tmpl) tmpl = std::make_unique<ChatTemplate>(read_file(fixture_path("templates/" + name)));
    ASSERT_TRUE(by_id.count(id)) << "unknown conversation " << id;
    Json context = expected.at("globals");
    for (const auto& [key, value] : by_id[id].items()) {
      if (key != "id") context[key] = value;
    }
    ++compared;
    if (entry.contains("error")) {
      ++errors;
      EXPECT_THROW(tmpl->render(context), Error) << "reference failed with: " << entry.at("error");
      continue;
    }
    std::string want = entry.at("output");
    if (const Divergence* d = find_divergence(name, id)) {
      const size_t at = want.find(d->from);
      ASSERT_NE(at, std::string::npos) << "divergence no longer applies: " << d->why;
      want.replace(at, std::string(d->from).size(), d->to);
    }
    std::string got;
    try {
      got = tmpl->render(context);
    } catch (const Error& e) {
      ADD_FAILURE() << "render threw: " << e.what();
      continue;
    }
    if (got != want) ADD_FAILURE() << describe_difference(want, got);
  }
  EXPECT_EQ(compared, templates.size() * conversations.size())
      << "expected.json is stale; rerun generate.mjs";
  EXPECT_GE(templates.size(), 6u);
  EXPECT_LT(errors, compared / 4) << "too many fixture pairs are render errors";
}

TEST(ChatTemplateErrors, SyntaxErrorsNameTheLine) {
  const struct {
    const char* source;
    const char* message;
  } cases[] = {
      {"line one\n{% if x %}\nnever closed", "chat template line 2: 'if' block is never closed"},
      {"a\nb\n{% for m in messages %}{{ m }}", "chat template line 3: 'for' block is never closed"},
      {"{% macro f() %}\nbody", "chat template line 1: 'macro' block is never closed"},
      {"ok\n\n{% frobnicate %}", "chat template line 3: unknown statement 'frobnicate'"},
      {"{{ 1 +\n* 2 }}", "chat template line 2: expected an expression"},
      {"\n{{ (1 + 2 }}", "chat template line 2: expected ')'"},
      {"{{ x | }}", "chat template line 1: expected a filter name"},
      {"x\ny\n{{ 'unterminated }}", "chat template line 3: unterminated string literal"},
      {"{# comment\nwithout end", "chat template line 1: comment is never closed"},
      {"{% endif %}", "chat template line 1: unknown statement 'endif'"},
      {"{% if a %}{% else %}{% else %}{% endif %}",
       "chat template line 1: unknown statement 'else'"},
      {"{{ a.'b' }}", "chat template line 1: expected a name or an integer after '.'"},
      {"\n\n{{ 'a' @ 'b' }}", "chat template line 3: unexpected character '@'"},
      {"{{ '\\q' }}", "chat template line 1: unexpected escaped character 'q'"},
      {"{% macro f(a=1, b) %}{% endmacro %}", "chat template line 1: parameter without default"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    try {
      ChatTemplate tmpl{std::string(c.source)};
      ADD_FAILURE() << "parsed without error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(c.message, 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "message must be one line";
    }
  }
}

TEST(ChatTemplateErrors, LinesSurviveWhitespaceControl) {
  // trim_blocks and `-` delete newlines before tokenizing; lines still refer to the source.
  EXPECT_EQ(error_of("{% if true -%}\n\n\n   {{ 1 + }}{% endif %}"),
            "chat template line 4: expected an expression, got '}}'");
}

TEST(ChatTemplateErrors, RaiseExceptionPropagatesItsMessage) {
  const std::string source =
      "{%- for m in messages %}\n"
      "{%- if m.role not in ['user', 'assistant'] %}\n"
      "{{- raise_exception('Unsupported role: ' + m.role) }}\n"
      "{%- endif %}\n"
      "{%- endfor %}";
  const Json context = {{"messages", Json::array({{{"role", "user"}}, {{"role", "robot"}}})}};
  EXPECT_EQ(error_of(source, context), "chat template line 3: Unsupported role: robot");
  EXPECT_EQ(error_of("{{ raise_exception() }}"), "chat template line 1: ");
}

TEST(ChatTemplateErrors, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(error_of("a\n{{ none + 1 }}"),
            "chat template line 2: Cannot perform operation on null values");
  EXPECT_EQ(error_of("{% for x in 3 %}{% endfor %}"),
            "chat template line 1: Expected iterable or object type in for loop: got IntegerValue");
  EXPECT_EQ(
      error_of("\n\n{{ x.upper() }}", {{"x", 5}}),
      "chat template line 3: Cannot call something that is not a function: got UndefinedValue");
  EXPECT_EQ(error_of("{{ [1] | frob }}"),
            "chat template line 1: Unknown filter \"frob\" for ArrayValue");
  EXPECT_EQ(error_of("{{ 1 is frob }}"), "chat template line 1: Unknown test: frob");
  EXPECT_EQ(error_of("{% break %}"), "chat template: 'break' outside of a loop");
  EXPECT_EQ(error_of("{{ x }}", {{"true", 1}}),
            "chat template: context variable 'true' collides with a builtin");
}

TEST(ChatTemplateErrors, RecursionIsBounded) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(5000, '(') + "1 }}").find("nested too deeply"),
            std::string::npos);
  std::string chain = "{{ 1";
  for (int i = 0; i < 1000; ++i) chain += " + 1";
  EXPECT_NE(error_of(chain + " }}").find("expression is too long"), std::string::npos);
  Json deep = Json::array();
  for (int i = 0; i < 1200; ++i) {
    Json outer = Json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  Json context = Json::object();
  context["x"] = std::move(deep);
  EXPECT_NE(error_of("{{ x | tojson }}", context).find("nested too deeply"), std::string::npos);
  const std::string built =
      "{% set ns = namespace(x=[]) %}{% for i in range(1200) %}{% set ns.x = [ns.x] %}{% endfor %}"
      "{{ ns.x }}";
  EXPECT_NE(error_of(built).find("nested too deeply"), std::string::npos);
}

TEST(ChatTemplateErrors, CallerCannotOutliveItsCallBlock) {
  const std::string source =
      "{% set ns = namespace() %}{% macro keep() %}{% set ns.c = caller %}{% endmacro %}"
      "{% for i in [1] %}{% call keep() %}x{% endcall %}{% endfor %}{{ ns.c() }}";
  EXPECT_EQ(error_of(source), "chat template line 1: caller() used outside of its call block");
}

}  // namespace
}  // namespace qs
