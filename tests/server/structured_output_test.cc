// Structured-output request fields (OpenAI response_format, vLLM structured_outputs / guided_*,
// llama-server json_schema / grammar, tool_choice) -> grammar sources, and their errors: a 400
// naming the field, never a silent fallback. Compiles against a byte-level vocabulary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "constrained/grammar_matcher.h"
#include "constrained/token_vocabulary.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/structured_output.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;
using constrained::GrammarKind;

ojson chat(ojson extra) {
  ojson body = {{"messages", ojson::array({{{"role", "user"}, {"content", "Hi"}}})}};
  for (const auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

std::string param_of_400(const ojson& body) {
  try {
    parse_chat_request(body, 1000);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "(accepted)";
}

TEST(StructuredOutput, EachFieldGivesItsSource) {
  const ojson schema = {{"type", "integer"}};
  struct Case { ojson extra; GrammarKind kind; std::string type; };
  const std::vector<Case> cases = {
      {{{"response_format", {{"type", "json_object"}}}}, GrammarKind::kJsonObject, "json_object"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", schema}, {"strict", true}}}}}},
       GrammarKind::kJsonSchema, "json_schema"},
      {{{"structured_outputs", {{"json", schema}}}}, GrammarKind::kJsonSchema, "json_schema"},
      {{{"structured_outputs", {{"regex", "a+"}}}}, GrammarKind::kRegex, "regex"},
      {{{"structured_outputs", {{"choice", {"a", "b"}}}}}, GrammarKind::kChoices, "choice"},
      {{{"structured_outputs", {{"grammar", "root ::= \"a\""}}}}, GrammarKind::kGbnf, "grammar"},
      {{{"guided_json", schema.dump()}}, GrammarKind::kJsonSchema, "json_schema"},
      {{{"guided_regex", "a"}}, GrammarKind::kRegex, "regex"},
      {{{"guided_choice", {"x"}}}, GrammarKind::kChoices, "choice"},
      {{{"json_schema", schema}}, GrammarKind::kJsonSchema, "json_schema"},
      {{{"grammar", "root ::= \"a\""}}, GrammarKind::kGbnf, "grammar"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}, {"tool_choice", "required"}}, GrammarKind::kToolCalls, "tool"},
  };
  for (const Case& c : cases) {
    const ChatRequest r = parse_chat_request(chat(c.extra), 1000);
    ASSERT_TRUE(r.fields.structured.has_value()) << c.extra.dump();
    EXPECT_EQ(r.fields.structured->source.kind, c.kind) << c.extra.dump();
    EXPECT_EQ(r.fields.structured->type, c.type);
  }
  for (const ojson& none : {ojson{{"response_format", {{"type", "text"}}}}, ojson{{"tool_choice", "auto"}},
                            ojson{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}, {"tool_choice", "none"}}}) {
    EXPECT_FALSE(parse_chat_request(chat(none), 1000).fields.structured.has_value()) << none.dump();
  }
}

TEST(StructuredOutput, WrongShapesAre400sNamingTheField) {
  EXPECT_EQ(param_of_400(chat({{"response_format", "json"}})), "response_format");
  EXPECT_EQ(param_of_400(chat({{"response_format", {{"type", "yaml"}}}})), "response_format.type");
  EXPECT_EQ(param_of_400(chat({{"response_format", {{"type", "json_schema"}}}})), "response_format.json_schema");
  EXPECT_EQ(param_of_400(chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}}}})),
            "response_format.json_schema.schema");
  EXPECT_EQ(param_of_400(chat({{"structured_outputs", {{"regex", 1}}}})), "structured_outputs.regex");
  EXPECT_EQ(param_of_400(chat({{"structured_outputs", {{"regex", "a"}, {"choice", {"b"}}}}})), "structured_outputs");
  EXPECT_EQ(param_of_400(chat({{"guided_choice", ojson::array()}})), "guided_choice");
  EXPECT_EQ(param_of_400(chat({{"response_format", {{"type", "json_object"}}}, {"grammar", "root ::= \"a\""}})), "grammar");
  EXPECT_EQ(param_of_400(chat({{"tool_choice", "required"}})), "tool_choice");
  EXPECT_EQ(param_of_400(chat({{"tool_choice", "sometimes"}})), "tool_choice");
  EXPECT_EQ(param_of_400(chat({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
                               {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}})),
            "tool_choice");
  EXPECT_EQ(param_of_400(chat({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}, {"tool_choice", "required"},
                               {"response_format", {{"type", "json_object"}}}})),
            "tool_choice");
  EXPECT_EQ(param_of_400(chat({{"parallel_tool_calls", "yes"}})), "parallel_tool_calls");
}

// A byte vocabulary: token b is byte b, token 256 is the stop token.
std::shared_ptr<const constrained::TokenVocabulary> byte_vocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  bytes.emplace_back();
  return std::make_shared<constrained::TokenVocabulary>(bytes, std::vector<int32_t>{256}, std::vector<int32_t>{}, 288);
}

bool accepts(const std::shared_ptr<const constrained::CompiledGrammar>& g, std::string_view text) {
  constrained::GrammarMatcher m(g);
  for (char c : text) {
    if (!m.accept_token(static_cast<uint8_t>(c))) return false;
  }
  return m.accept_token(256);
}

TEST(StructuredOutput, CompileErrorsAre400sAndToolCallsFollowQwensFormat) {
  constrained::GrammarCompiler compiler(byte_vocab());
  metrics::ServerMetrics metrics;
  const StructuredOutput bad{constrained::GrammarSource::json_schema(R"({"type":"string","not":{}})"), "json_schema", "response_format.json_schema.schema"};
  try {
    compile_structured_output(compiler, bad, &metrics);
    FAIL() << "an unsupported keyword must be a 400";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "response_format.json_schema.schema");
    EXPECT_NE(std::string(e.what()).find("not"), std::string::npos) << e.what();
  }
  const ojson tools = {{{"type", "function"}, {"function", {{"name", "add"}, {"parameters",
      {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}, {"required", {"a"}}, {"additionalProperties", false}}}}}},
                       {{"type", "function"}, {"function", {{"name", "noop"}}}}};
  const std::string add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":12}}\n</tool_call>";
  const std::string noop = "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>";
  auto required = tool_choice_grammar(tools, "required", true);
  ASSERT_TRUE(required);
  auto g = compile_structured_output(compiler, *required, &metrics);
  EXPECT_TRUE(accepts(g, add));
  EXPECT_TRUE(accepts(g, noop));
  EXPECT_TRUE(accepts(g, add + "\n" + noop));
  EXPECT_FALSE(accepts(g, "hello"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":\"x\"}}\n</tool_call>"));
  auto single = compile_structured_output(compiler, *tool_choice_grammar(tools, "required", false), nullptr);
  EXPECT_FALSE(accepts(single, add + "\n" + noop));
  auto named = compile_structured_output(
      compiler, *tool_choice_grammar(tools, ojson{{"type", "function"}, {"function", {{"name", "noop"}}}}, true), nullptr);
  EXPECT_TRUE(accepts(named, noop));
  EXPECT_FALSE(accepts(named, add));
}

}  // namespace
}  // namespace qs
