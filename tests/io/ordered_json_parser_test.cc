// parse_ordered_json against its references: the text's own member order (JSON Schema property
// order depends on it), nlohmann::ordered_json::parse's duplicate-key rule (first position, last
// value) and its exceptions, and a CPU-time bound that only a parser linear in the number of
// members meets (ordered_json::parse scans an object's members before each insert: O(N^2)).
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/ordered_json_parser.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

std::vector<std::string> keys_of(const ojson& object) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.push_back(key);
  return keys;
}

// {"0": 0, "1": 1, ..., "n-1": n-1}
std::string object_of(size_t n) {
  std::string text = "{";
  for (size_t i = 0; i < n; ++i) text += (i ? ",\"" : "\"") + std::to_string(i) + "\":" + std::to_string(i);
  return text + "}";
}

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// 200,000 members in ~2.5 MB. Linear parsing takes well under a second even on a loaded machine;
// the quadratic one compares ~2*10^10 keys (minutes).
TEST(OrderedJsonParser, ObjectWith200kMembersParsesWithinTwoCpuSeconds) {
  const std::string text = object_of(200000);
  const double start = cpu_seconds();
  const ojson v = parse_ordered_json(text);
  const double used = cpu_seconds() - start;
  EXPECT_LT(used, 2.0) << "CPU seconds";
  ASSERT_EQ(v.size(), 200000u);
  EXPECT_EQ(v.begin().key(), "0");
  EXPECT_EQ((--v.end()).key(), "199999");
  EXPECT_EQ(v["123456"], 123456);
}

// The request parser the server uses: a body whose logit_bias has 150,000 members (11 s for 50,000
// before) parses and validates within the same bound.
TEST(OrderedJsonParser, RequestBodyWithHugeLogitBiasIsParsedWithinTwoCpuSeconds) {
  std::string text = R"({"prompt": "x", "logit_bias": {)";
  for (int i = 0; i < 150000; ++i) text += (i ? ",\"" : "\"") + std::to_string(i) + "\":1";
  text += "}}";
  const double start = cpu_seconds();
  const CompletionRequest r = parse_completion_request(parse_json_limited(text), 151936);
  const double used = cpu_seconds() - start;
  EXPECT_LT(used, 2.0) << "CPU seconds";
  EXPECT_EQ(r.fields.sampling.logit_bias.size(), 150000u);
}

TEST(OrderedJsonParser, MembersKeepTheTextsOrderAtEveryLevel) {
  const ojson v = parse_ordered_json(R"({"z": 1, "a": {"y": 1, "b": 2, "x": 3}, "m": [{"q": 1, "c": 2}]})");
  EXPECT_EQ(keys_of(v), (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(keys_of(v["a"]), (std::vector<std::string>{"y", "b", "x"}));
  EXPECT_EQ(keys_of(v["m"][0]), (std::vector<std::string>{"q", "c"}));
  // Past the size where duplicates are found by hashing instead of scanning: still text order.
  std::vector<std::string> expected;
  std::string text = "{";
  for (int i = 99; i >= 0; --i) {
    expected.push_back("k" + std::to_string(i * 7 % 100));
    text += (i == 99 ? "\"" : ",\"") + expected.back() + "\":" + std::to_string(i);
  }
  EXPECT_EQ(keys_of(parse_ordered_json(text + "}")), expected);
}

// nlohmann::ordered_json::parse: a repeated key keeps its first position and takes the last value.
TEST(OrderedJsonParser, RepeatedKeyKeepsItsFirstPositionAndTheLastValue) {
  const ojson small = parse_ordered_json(R"({"a": 1, "b": 2, "a": {"x": 1}, "c": 3, "a": [4]})");
  EXPECT_EQ(keys_of(small), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(small["a"], ojson::array({4}));
  EXPECT_EQ(small["b"], 2);
  // 40 members, then "k3" and "k30" again: found through the hash index.
  std::string text = "{";
  for (int i = 0; i < 40; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += R"(,"k30": "last", "k3": null, "k40": 40})";
  const ojson big = parse_ordered_json(text);
  ASSERT_EQ(big.size(), 41u);
  EXPECT_EQ(std::next(big.begin(), 3).key(), "k3");
  EXPECT_TRUE(std::next(big.begin(), 3).value().is_null());
  EXPECT_EQ(std::next(big.begin(), 30).key(), "k30");
  EXPECT_EQ(std::next(big.begin(), 30).value(), "last");
  EXPECT_EQ((--big.end()).key(), "k40");
  // And the same value as the reference implementation for both.
  EXPECT_EQ(small, ojson::parse(R"({"a": 1, "b": 2, "a": {"x": 1}, "c": 3, "a": [4]})"));
  EXPECT_EQ(big.dump(), ojson::parse(text).dump());
}

TEST(OrderedJsonParser, ScalarsAndNestingEqualTheReferenceParser) {
  for (const char* text : {"null", "true", "-12", "18446744073709551615", "1.5e3", "\"\\u00e9\\n\"", "[]", "{}",
                           R"([1, [2, [3, {"a": [null, false, {"b": {}}]}]], "s"])", " { \"k\" : [ ] } "}) {
    EXPECT_EQ(parse_ordered_json(text).dump(), ojson::parse(text).dump()) << text;
  }
}

TEST(OrderedJsonParser, MalformedTextThrowsTheReferenceParsersException) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "1 2", "nul", "1e999", "\"\\ud800\"", "{\"a\":1,}"}) {
    std::string expected;
    try {
      (void)ojson::parse(text);
      ADD_FAILURE() << "reference accepted " << text;
    } catch (const nlohmann::json::exception& e) {
      expected = e.what();
    }
    try {
      (void)parse_ordered_json(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const nlohmann::json::exception& e) {
      EXPECT_EQ(std::string(e.what()), expected) << text;
    }
  }
  EXPECT_THROW((void)parse_ordered_json("[1,]"), nlohmann::json::parse_error);
  EXPECT_THROW((void)parse_ordered_json("1e999"), nlohmann::json::out_of_range);  // number overflow
}

TEST(OrderedJsonParser, DepthCountsOpenObjectsAndArrays) {
  EXPECT_NO_THROW((void)parse_ordered_json("1", 0));
  EXPECT_THROW((void)parse_ordered_json("[]", 0), JsonTooDeep);
  EXPECT_NO_THROW((void)parse_ordered_json(R"([{"a": []}, [[]]])", 3));
  EXPECT_THROW((void)parse_ordered_json(R"([{"a": [[]]}])", 3), JsonTooDeep);
  EXPECT_NO_THROW((void)parse_ordered_json(std::string(5000, '[') + std::string(5000, ']')));  // no limit
}

// The server's body parser keeps its codes: json_too_deep past kMaxJsonDepth, invalid_json else.
TEST(OrderedJsonParser, RequestBodyErrorsKeepTheirCodes) {
  const std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  try {
    parse_json_limited(deep);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "json_too_deep");
  }
  EXPECT_NO_THROW(parse_json_limited(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')));
  try {
    parse_json_limited("{\"a\":");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_json");
  }
}

}  // namespace
}  // namespace qs
