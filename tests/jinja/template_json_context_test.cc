// A JSON render context becomes template values in time linear in its size (a tool schema or
// chat_template_kwargs object of N members used to cost O(N^2): each member was inserted with a
// scan for its key), with the key order ECMA-262 gives an object's own keys (section 10.1.11.1,
// OrdinaryOwnPropertyKeys: array-index keys in ascending numeric order, then the other string
// keys in creation order), as the JavaScript engines that render these templates do.
#include <gtest/gtest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"

namespace qs {
namespace {

using Json = nlohmann::ordered_json;

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

TEST(TemplateJsonContext, ObjectWith200kMembersConvertsWithinTwoCpuSeconds) {
  Json big = Json::object();
  auto& members = big.get_ref<Json::object_t&>();  // appended directly: operator[] would scan
  for (int i = 0; i < 100000; ++i) {  // half array-index keys, half names
    members.emplace_back(std::to_string(i), i);
    members.emplace_back("k" + std::to_string(i), i);
  }
  const Json context = {{"d", std::move(big)}};
  const double start = cpu_seconds();
  const std::string out = ChatTemplate("{{ d | length }}").render(context);
  const double used = cpu_seconds() - start;
  EXPECT_EQ(out, "200000");
  EXPECT_LT(used, 2.0) << "CPU seconds";
}

TEST(TemplateJsonContext, KeysFollowEcmaScriptOwnPropertyOrder) {
  const Json context = Json::parse(R"({"d": {"b": 1, "10": 2, "a": 3, "2": 4, "01": 5, "0": 6}})");
  EXPECT_EQ(ChatTemplate("{% for k in d %}{{ k }},{% endfor %}").render(context), "0,2,10,b,a,01,");
  EXPECT_EQ(ChatTemplate("{{ d['10'] }}{{ d.a }}{{ d['01'] }}").render(context), "235");
}

}  // namespace
}  // namespace qs
