// JSON Schemas listing many properties: the schema text is parsed, required names are checked
// against the properties and allOf members' properties and required lists are united without a
// scan per key (each made N properties cost O(N^2)). The semantics checked alongside follow the JSON Schema
// rules: an instance of allOf satisfies every member, so it has every member's required
// properties.
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "constrained/grammar_compiler.h"
#include "constrained/json_schema_merge.h"
#include "constrained_test_support.h"
#include "core/error.h"
#include "io/ordered_json_parser.h"

namespace qs::test {
namespace {

using constrained::GrammarSource;

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// The 2-second bounds below separate linear work (well under a second in a release build) from
// the quadratic scans they guard against (minutes). A sanitizer build runs the same work 3-5x
// slower (ASan + UBSan: 4.8 s measured for the 200k-property schema on an idle machine, 10.7 s on a
// 2-vCPU VM with both vCPUs busy), so its bound is 15x: still far below the quadratic minutes.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kBuildSlowdown = 15;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr double kBuildSlowdown = 15;
#else
constexpr double kBuildSlowdown = 1;
#endif
#else
constexpr double kBuildSlowdown = 1;
#endif
constexpr double kBoundCpuSeconds = 2.0 * kBuildSlowdown;

// {"type": "object", "properties": {"p<from>": {"type": "integer"}, ...}, "required": [...]}
std::string object_schema(int from, int to) {
  std::string props, required;
  for (int i = from; i < to; ++i) {
    const std::string name = "\"p" + std::to_string(i) + "\"";
    props += (i > from ? "," : "") + name + R"(:{"type":"integer"})";
    required += (i > from ? "," : "") + name;
  }
  return R"({"type":"object","properties":{)" + props + R"(},"required":[)" + required + "]}";
}

// allOf of two members of 50,000 properties each, overlapping on 25,000: the merge unites them
// (75,000 properties, 75,000 required names) within the bound; scanning for each key took
// ~10^9 comparisons per list.
TEST(JsonSchemaScale, AllOfMergeOfTwo50kPropertyMembersWithinTwoCpuSeconds) {
  const std::vector<nlohmann::ordered_json> members = {parse_ordered_json(object_schema(0, 50000)),
                                                       parse_ordered_json(object_schema(25000, 75000))};
  const double start = cpu_seconds();
  const nlohmann::ordered_json merged = constrained::merge_schemas(members, "#");
  const double used = cpu_seconds() - start;
  EXPECT_LT(used, kBoundCpuSeconds) << "CPU seconds";
  ASSERT_EQ(merged["properties"].size(), 75000u);
  EXPECT_EQ(merged["required"].size(), 75000u);
  EXPECT_EQ(merged["properties"].begin().key(), "p0");
  EXPECT_EQ((--merged["properties"].end()).key(), "p74999");
  EXPECT_EQ(merged["properties"]["p30000"], nlohmann::ordered_json({{"type", "integer"}})) << "equal in both: kept as is";
}

// A response_format schema reaches the compiler as text, parsed again there, and its required
// names are checked against its properties before any symbol is made: a schema of 200,000
// required properties (past the default symbol limit) is refused within the bound instead of
// spending minutes scanning each object for every key inserted and the property list for every
// required name.
TEST(JsonSchemaScale, SchemaTextWith200kPropertiesIsRefusedWithinTwoCpuSeconds) {
  const std::string schema = object_schema(0, 200000);
  const double start = cpu_seconds();
  EXPECT_THROW(constrained::parse_grammar_source(GrammarSource::json_schema(schema)), Error);
  const double used = cpu_seconds() - start;
  EXPECT_LT(used, kBoundCpuSeconds) << "CPU seconds";
}

TEST(JsonSchemaScale, AllOfRequiresEveryMembersProperties) {
  const std::string schema = R"({"allOf":[)" + object_schema(0, 2) + "," + object_schema(1, 3) + "]}";
  EXPECT_TRUE(schema_matches(schema, R"({"p0":1,"p1":2,"p2":3})"));
  EXPECT_FALSE(schema_matches(schema, R"({"p0":1,"p1":2})"));
  EXPECT_FALSE(schema_matches(schema, R"({"p1":2,"p2":3})"));
}

}  // namespace
}  // namespace qs::test
