// JSON Schema keyword semantics of the generated grammars: texts that validate per the JSON Schema
// specification are accepted, texts that violate the keyword are rejected. Expectations come from
// the specification's rules (computed independently, e.g. "x in [lo, hi]"), never from our output.
#include <gtest/gtest.h>

#include <string>

#include "constrained_test_support.h"
#include "core/error.h"

namespace qs::test {
namespace {

using constrained::GrammarSource;

TEST(JsonSchemaGrammar, IntegerRangeIsExact) {
  for (auto [lo, hi] : {std::pair{-37, 112}, {0, 9}, {5, 5}, {-100, -10}, {99, 1001}}) {
    const std::string schema = R"({"type":"integer","minimum":)" + std::to_string(lo) + R"(,"maximum":)" + std::to_string(hi) + "}";
    for (int x = -1200; x <= 1200; ++x) {
      EXPECT_EQ(schema_matches(schema, std::to_string(x)), x >= lo && x <= hi) << schema << " " << x;
    }
  }
}

TEST(JsonSchemaGrammar, IntegerExclusiveBoundsAndSpelling) {
  const std::string s = R"({"type":"integer","exclusiveMinimum":-3,"exclusiveMaximum":4})";
  for (int x = -10; x <= 10; ++x) EXPECT_EQ(schema_matches(s, std::to_string(x)), x > -3 && x < 4) << x;
  EXPECT_FALSE(schema_matches(R"({"type":"integer"})", "01"));   // leading zero is not JSON
  EXPECT_FALSE(schema_matches(R"({"type":"integer"})", "-0"));   // never generated (value 0 as "0")
  EXPECT_FALSE(schema_matches(R"({"type":"integer"})", "1.5"));
  EXPECT_TRUE(schema_matches(R"({"type":"integer","minimum":100})", "123456789"));
  EXPECT_FALSE(schema_matches(R"({"type":"integer","minimum":100})", "99"));
}

TEST(JsonSchemaGrammar, NumberBounds) {
  const std::string s = R"({"type":"number","minimum":-1.5,"maximum":2.25})";
  for (const char* ok : {"-1", "0", "2", "0.5", "1.75", "-0.5", "1.999"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {"-2", "3", "2.5", "-1.75", "10", "abc"}) EXPECT_FALSE(schema_matches(s, bad)) << bad;
  const std::string ex = R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})";
  EXPECT_FALSE(schema_matches(ex, "0"));
  EXPECT_FALSE(schema_matches(ex, "1"));
  EXPECT_TRUE(schema_matches(ex, "0.25"));
  EXPECT_FALSE(schema_matches(ex, "0.0"));  // equals the exclusive bound
  for (const char* ok : {"0", "-12.5", "3e10", "1E-2", "7.0"}) EXPECT_TRUE(schema_matches(R"({"type":"number"})", ok)) << ok;
  for (const char* bad : {"+1", ".5", "1.", "--1", "0x10"}) EXPECT_FALSE(schema_matches(R"({"type":"number"})", bad)) << bad;
}

TEST(JsonSchemaGrammar, StringLengthCountsCodePoints) {
  const std::string s = R"({"type":"string","minLength":2,"maxLength":3})";
  EXPECT_FALSE(schema_matches(s, R"("a")"));
  EXPECT_TRUE(schema_matches(s, R"("ab")"));
  EXPECT_TRUE(schema_matches(s, R"("abc")"));
  EXPECT_FALSE(schema_matches(s, R"("abcd")"));
  EXPECT_TRUE(schema_matches(s, "\"\xc3\xa9\xe6\x97\xa5\""));       // "é日": 2 code points, 5 bytes
  EXPECT_TRUE(schema_matches(s, R"("\n\u00e9")"));                  // escapes count as one
  EXPECT_FALSE(schema_matches(s, "\"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x8e\x83x\""));  // 4 code points
  EXPECT_FALSE(schema_matches(s, "\"a\nb\""));                      // raw control character
  EXPECT_FALSE(schema_matches(s, "\"a\xff\""));                     // invalid UTF-8
  EXPECT_FALSE(schema_matches(s, R"("\ud800x")"));                  // lone surrogate escape
}

TEST(JsonSchemaGrammar, TypesUnionsNullBoolean) {
  const std::string s = R"({"type":["string","null","boolean"]})";
  for (const char* ok : {"null", "true", "false", R"("x")"}) EXPECT_TRUE(schema_matches(s, ok)) << ok;
  for (const char* bad : {"1", "[]", "{}", "nul", "True"}) EXPECT_FALSE(schema_matches(s, bad)) << bad;
}

TEST(JsonSchemaGrammar, EnumAndConst) {
  const std::string e = R"({"enum":["a",1,null,{"k":[true]}]})";
  for (const char* ok : {R"("a")", "1", "null", R"({"k":[true]})"}) EXPECT_TRUE(schema_matches(e, ok)) << ok;
  for (const char* bad : {R"("b")", "2", R"({"k":[false]})"}) EXPECT_FALSE(schema_matches(e, bad)) << bad;
  // Values of the wrong type can never validate ("type" applies too).
  const std::string typed = R"({"type":"string","enum":["a",1,"b",null]})";
  EXPECT_TRUE(schema_matches(typed, R"("b")"));
  EXPECT_FALSE(schema_matches(typed, "1"));
  EXPECT_FALSE(schema_matches(typed, "null"));
  EXPECT_TRUE(schema_matches(R"({"type":"integer","enum":[1.0,2.5]})", "1.0"));
  EXPECT_FALSE(schema_matches(R"({"type":"integer","enum":[1.0,2.5]})", "2.5"));
  EXPECT_TRUE(schema_matches(R"({"const":"x\"y"})", R"("x\"y")"));
  EXPECT_FALSE(schema_matches(R"({"const":"x\"y"})", R"("xy")"));
}

TEST(JsonSchemaGrammar, PropertiesRequiredAndOrder) {
  const std::string s = R"({"type":"object","properties":{"b":{"type":"integer","minimum":0,"maximum":9},"a":{"type":"boolean"}},"required":["a"]})";
  EXPECT_TRUE(schema_matches(s, R"({"b":1,"a":true})"));
  EXPECT_TRUE(schema_matches(s, R"({"a":false})"));
  EXPECT_FALSE(schema_matches(s, R"({"b":1})"));             // required a missing
  EXPECT_FALSE(schema_matches(s, R"({})"));
  EXPECT_FALSE(schema_matches(s, R"({"a":true,"c":1})"));   // no extra properties when listed
  EXPECT_FALSE(schema_matches(s, R"({"b":10,"a":true})"));  // value schema applies
  EXPECT_FALSE(schema_matches(s, R"({"a":true,"a":true})"));
  EXPECT_FALSE(schema_matches(s, R"({"b":1,"a":true,})"));
}

TEST(JsonSchemaGrammar, AdditionalProperties) {
  const std::string t = R"({"type":"object","properties":{"id":{"type":"null"}},"additionalProperties":true})";
  EXPECT_TRUE(schema_matches(t, R"({"id":null,"x":[1,{"y":"z"}]})"));
  EXPECT_TRUE(schema_matches(t, R"({"other":1})"));
  EXPECT_FALSE(schema_matches(t, R"({"id":null,"id":1})"));  // an extra key may not reuse "id"
  EXPECT_TRUE(schema_matches(t, R"({"id":null,"idx":1})"));
  const std::string sch = R"({"type":"object","additionalProperties":{"type":"integer","minimum":0,"maximum":5}})";
  EXPECT_TRUE(schema_matches(sch, R"({"a":1,"b":5})"));
  EXPECT_FALSE(schema_matches(sch, R"({"a":6})"));
  const std::string absent = R"({"type":"object","properties":{"a":{"type":"null"},"gone":false}})";
  EXPECT_TRUE(schema_matches(absent, R"({"a":null})"));
  EXPECT_FALSE(schema_matches(absent, R"({"gone":null})"));
  const std::string f = R"({"type":"object","properties":{"id":{"type":"null"}},"additionalProperties":false})";
  EXPECT_FALSE(schema_matches(f, R"({"id":null,"x":1})"));
  EXPECT_TRUE(schema_matches(R"({"type":"object"})", R"({"any":{"thing":[null]}})"));
}

TEST(JsonSchemaGrammar, ArraysItemsPrefixItemsCounts) {
  const std::string s = R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":1,"maxItems":3})";
  EXPECT_FALSE(schema_matches(s, "[]"));
  EXPECT_TRUE(schema_matches(s, "[1]"));
  EXPECT_TRUE(schema_matches(s, "[1,2,3]"));
  EXPECT_FALSE(schema_matches(s, "[1,2,3,4]"));
  EXPECT_FALSE(schema_matches(s, "[10]"));
  EXPECT_FALSE(schema_matches(s, "[1,]"));
  const std::string p = R"({"type":"array","prefixItems":[{"type":"boolean"},{"type":"null"}],"items":{"const":0},"minItems":1})";
  EXPECT_TRUE(schema_matches(p, "[true]"));
  EXPECT_TRUE(schema_matches(p, "[true,null,0,0]"));
  EXPECT_FALSE(schema_matches(p, "[null]"));
  EXPECT_FALSE(schema_matches(p, "[true,null,1]"));
  const std::string closed = R"({"type":"array","prefixItems":[{"type":"boolean"}],"items":false})";
  EXPECT_TRUE(schema_matches(closed, "[]"));
  EXPECT_TRUE(schema_matches(closed, "[false]"));
  EXPECT_FALSE(schema_matches(closed, "[false,true]"));
}

TEST(JsonSchemaGrammar, PatternIsSearchedUnlessAnchored) {
  EXPECT_TRUE(schema_matches(R"({"type":"string","pattern":"^[a-c]{2}$"})", R"("ab")"));
  EXPECT_FALSE(schema_matches(R"({"type":"string","pattern":"^[a-c]{2}$"})", R"("abc")"));
  EXPECT_TRUE(schema_matches(R"({"type":"string","pattern":"b+"})", R"("xxbbyy")"));
  EXPECT_FALSE(schema_matches(R"({"type":"string","pattern":"b+"})", R"("xxyy")"));
  // A quote in the pattern is written escaped inside the JSON string.
  EXPECT_TRUE(schema_matches(R"({"type":"string","pattern":"^a\"$"})", R"("a\"")"));
}

TEST(JsonSchemaGrammar, CombinatorsAndRefs) {
  const std::string any = R"({"anyOf":[{"type":"integer","minimum":0,"maximum":3},{"type":"string","maxLength":1}]})";
  EXPECT_TRUE(schema_matches(any, "2"));
  EXPECT_TRUE(schema_matches(any, R"("x")"));
  EXPECT_FALSE(schema_matches(any, "4"));
  EXPECT_FALSE(schema_matches(any, R"("xy")"));
  const std::string all = R"({"allOf":[{"type":"object","properties":{"a":{"type":"null"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]})";
  EXPECT_TRUE(schema_matches(all, R"({"a":null,"b":true})"));
  EXPECT_FALSE(schema_matches(all, R"({"a":null})"));
  EXPECT_FALSE(schema_matches(all, R"({"b":true})"));
  const std::string rec = R"({"$defs":{"n":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},"additionalProperties":false}},"$ref":"#/$defs/n"})";
  EXPECT_TRUE(schema_matches(rec, R"({"c":[{"c":[{},{"c":[]}]}]})"));
  EXPECT_FALSE(schema_matches(rec, R"({"c":[{"d":1}]})"));
  EXPECT_FALSE(schema_matches(rec, R"({"c":[{},{},{}]})"));
}

void expect_error(const std::string& schema, const std::string& needle) {
  try {
    constrained::parse_grammar_source(GrammarSource::json_schema(schema));
    ADD_FAILURE() << "no error for " << schema;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(JsonSchemaGrammar, ErrorsNameTheKeyword) {
  expect_error(R"({"type":"string","format":"date"})", "'format'");
  expect_error(R"({"type":"array","uniqueItems":true})", "'uniqueItems'");
  expect_error(R"({"type":"integer","multipleOf":2})", "'multipleOf'");
  expect_error(R"({"type":"string","minLength":3,"maxLength":1})", "minLength");
  expect_error(R"({"type":"integer","minimum":3,"maximum":2})", "minimum");
  expect_error(R"({"type":"integer","minimum":"a"})", "'minimum' must be a number");
  expect_error(R"({"$ref":"#/$defs/nope"})", "$ref '#/$defs/nope'");
  expect_error(R"({"$ref":"http://x/y.json"})", "only local");
  expect_error(R"j({"type":"string","pattern":"(?=a)"})j", "lookaround");
  expect_error(R"({"type":"string","pattern":"[a-"})", "missing ']'");
  expect_error(R"({"properties":{"a":{"type":"object","properties":{"b":false},"required":["b"]}}})", "false schema");
  expect_error(R"({"type":"object","required":["x"],"additionalProperties":false})", "'x'");
  expect_error(R"({"allOf":[{"type":"string"},{"type":"null"}]})", "'type'");
  expect_error(R"({"anyOf":[]})", "'anyOf'");
  expect_error(R"({"type":"string","enum":[1,2]})", "'enum'");
  expect_error(R"({"type":"null","const":0})", "'const'");
  expect_error("{not json", "not valid JSON");
  expect_error(R"({"type":"string","maxLength":1000000000})", "'maxLength'");
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  expect_error(deep, "nested deeper");
}

TEST(JsonSchemaGrammar, JsonObjectIsAnyObject) {
  const auto src = GrammarSource::json_object();
  EXPECT_TRUE(matches(src, "{}"));
  EXPECT_TRUE(matches(src, R"({"a":[1,-2.5e3,"x",null,true,{"b":{}}]})"));
  EXPECT_FALSE(matches(src, "[]"));
  EXPECT_FALSE(matches(src, R"("x")"));
  EXPECT_FALSE(matches(src, R"({"a":1,})"));
  EXPECT_FALSE(matches(src, R"({"a" : 1})"));  // compact: no whitespace
}

}  // namespace
}  // namespace qs::test
