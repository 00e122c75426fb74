#include "constrained/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "constrained/char_classes.h"
#include "constrained/json_schema_compiler.h"
#include "constrained/grammar_compiler.h"
#include "constrained/json_number_grammar.h"
#include "constrained/json_schema_merge.h"
#include "constrained/regex_grammar.h"
#include "core/error.h"

namespace qs::constrained {

using schema_detail::ojson;
using schema_detail::SchemaCompiler;

namespace {

const std::set<std::string> kSupported = {
    "type",     "properties", "required",  "additionalProperties", "enum",      "const",
    "items",    "prefixItems", "additionalItems", "minItems",      "maxItems",  "minLength",
    "maxLength", "pattern",   "minimum",   "maximum",              "exclusiveMinimum",
    "exclusiveMaximum", "anyOf", "oneOf",  "allOf",                "$ref"};

const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeys = {"items", "prefixItems", "additionalItems", "minItems", "maxItems"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength", "pattern"};
const std::set<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

/// True when `v` is an instance of one of the schema's "type" entries (or there is no "type").
bool type_allows(const ojson& s, const ojson& v) {
  if (!s.contains("type")) return true;
  std::vector<std::string> types;
  if (s["type"].is_string()) types.push_back(s["type"].get<std::string>());
  if (s["type"].is_array()) {
    for (const auto& t : s["type"]) {
      if (t.is_string()) types.push_back(t.get<std::string>());
    }
  }
  for (const auto& t : types) {
    if ((t == "null" && v.is_null()) || (t == "boolean" && v.is_boolean()) ||
        (t == "number" && v.is_number()) || (t == "string" && v.is_string()) ||
        (t == "array" && v.is_array()) || (t == "object" && v.is_object()) ||
        (t == "integer" && v.is_number() && std::floor(v.get<double>()) == v.get<double>())) {
      return true;
    }
  }
  return false;
}

}  // namespace

namespace schema_detail {


Symbol SchemaCompiler::any_value() {
  if (any_value_ >= 0) return Symbol::ref(any_value_);
  any_value_ = b_.declare("value");
  const Symbol v = Symbol::ref(any_value_);
  const Symbol member = b_.alt({{any_string(), Symbol::byte(':'), v}}, "member");
  const Symbol obj = b_.alt({{Symbol::byte('{'), b_.opt({member, b_.star({Symbol::byte(','), member})}), Symbol::byte('}')}}, "object");
  any_object_ = obj.rule;
  const Symbol arr = b_.alt({{Symbol::byte('['), b_.opt({v, b_.star({Symbol::byte(','), v})}), Symbol::byte(']')}}, "array");
  const Symbol num = b_.alt({any_number(b_)}, "number");
  b_.define(any_value_, {{obj}, {arr}, {any_string()}, {num}, GrammarBuilder::literal("true"),
                         GrammarBuilder::literal("false"), GrammarBuilder::literal("null")});
  return v;
}

Symbol SchemaCompiler::any_object() {
  any_value();
  return Symbol::ref(any_object_);
}

const ojson& SchemaCompiler::resolve(const std::string& r, const std::string& path) const {
  if (r.empty() || r[0] != '#') fail(path, "$ref '" + r + "' is not supported (only local '#...' references)");
  try {
    return doc_.at(ojson::json_pointer(r.substr(1)));
  } catch (const std::exception&) {
    fail(path, "$ref '" + r + "' does not resolve");
  }
}

ojson SchemaCompiler::resolve_member(const ojson& m, const std::string& path, int depth) const {
  ojson cur = m;
  for (int hops = 0; cur.is_object() && cur.contains("$ref"); ++hops) {
    if (hops > limits_.max_schema_depth) fail(path, "$ref chain deeper than the compile limit");
    if (!cur["$ref"].is_string()) fail(path, "'$ref' must be a string");
    ojson target = resolve(cur["$ref"].get<std::string>(), path);
    ojson rest = cur;
    rest.erase("$ref");
    bool constraining = false;
    for (const auto& [k, v] : rest.items()) constraining = constraining || !is_schema_annotation(k);
    cur = constraining ? merge_schemas({target, rest}, path) : target;
  }
  return cur;
}

Symbol SchemaCompiler::ref(const std::string& r, const std::string& path, int depth) {
  if (auto it = refs_.find(r); it != refs_.end()) return Symbol::ref(it->second);
  const ojson& target = resolve(r, path);
  const int32_t rule = b_.declare("$ref " + r);
  refs_[r] = rule;
  const Symbol body = value(target, r, depth + 1);
  b_.define(rule, {{body}});
  return Symbol::ref(rule);
}

int64_t SchemaCompiler::count(const ojson& s, const char* key, const std::string& path) const {
  const ojson& v = s[key];
  if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>())) {
    fail(path, std::string("'") + key + "' must be a non-negative integer");
  }
  const double d = v.get<double>();
  if (d > static_cast<double>(limits_.max_repeat)) {
    fail(path, std::string("'") + key + "' " + v.dump() + " exceeds the compile limit " +
                   std::to_string(limits_.max_repeat));
  }
  return static_cast<int64_t>(d);
}

Symbol SchemaCompiler::value(const ojson& s, const std::string& path, int depth) {
  if (depth > limits_.max_schema_depth) {
    fail(path, "schema nested deeper than " + std::to_string(limits_.max_schema_depth) + " levels");
  }
  // Equal sub-schemas share one rule (fewer grammar positions to classify at compile time).
  std::string key = s.dump();
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const Symbol sym = value_uncached(s, path, depth);
  memo_.emplace(std::move(key), sym);
  return sym;
}

Symbol SchemaCompiler::value_uncached(const ojson& s, const std::string& path, int depth) {
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail(path, "the false schema is unsatisfiable");
    return any_value();
  }
  if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
  for (const auto& [k, v] : s.items()) {
    if (!kSupported.count(k) && !is_schema_annotation(k)) fail(path, "unsupported keyword '" + k + "'");
  }
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) fail(path, "'$ref' must be a string");
    bool constraining = false;
    for (const auto& [k, v] : s.items()) constraining = constraining || (k != "$ref" && !is_schema_annotation(k));
    if (!constraining) return ref(s["$ref"].get<std::string>(), path, depth);
    return value(resolve_member(s, path, depth), path, depth + 1);
  }
  if (s.contains("allOf")) {
    const ojson& list = s["allOf"];
    if (!list.is_array() || list.empty()) fail(path, "'allOf' must be a non-empty array");
    std::vector<ojson> members;
    ojson base = s;
    base.erase("allOf");
    members.push_back(base);
    for (size_t i = 0; i < list.size(); ++i) members.push_back(resolve_member(list[i], path + "/allOf/" + std::to_string(i), depth));
    return value(merge_schemas(members, path), path, depth + 1);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    const ojson& list = s[key];
    if (!list.is_array() || list.empty()) fail(path, std::string("'") + key + "' must be a non-empty array");
    ojson base = s;
    base.erase(key);
    bool constraining = false;
    for (const auto& [k, v] : base.items()) constraining = constraining || !is_schema_annotation(k);
    std::vector<Sequence> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string sub = path + "/" + key + "/" + std::to_string(i);
      if (constraining) {
        alts.push_back({value(merge_schemas({base, resolve_member(list[i], sub, depth)}, sub), sub, depth + 1)});
      } else {
        alts.push_back({value(list[i], sub, depth + 1)});
      }
    }
    return b_.alt(std::move(alts), key);
  }
  if (s.contains("const")) {
    if (!type_allows(s, s["const"])) fail(path, "'const' value does not have the schema's 'type'");
    return literal_json(s["const"]);
  }
  if (s.contains("enum")) {
    const ojson& list = s["enum"];
    if (!list.is_array() || list.empty()) fail(path, "'enum' must be a non-empty array");
    std::vector<Sequence> alts;
    for (const auto& v : list) {
      if (type_allows(s, v)) alts.push_back(GrammarBuilder::literal(v.dump()));
    }
    if (alts.empty()) fail(path, "no 'enum' value has the schema's 'type'");
    return b_.alt(std::move(alts), "enum");
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const ojson& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const auto& x : t) {
        if (!x.is_string()) fail(path, "'type' entries must be strings");
        types.push_back(x.get<std::string>());
      }
    } else {
      fail(path, "'type' must be a string or a non-empty array of strings");
    }
  } else {
    for (const auto& [k, v] : s.items()) {
      if (kObjectKeys.count(k)) types.push_back("object");
      if (kArrayKeys.count(k)) types.push_back("array");
      if (kStringKeys.count(k)) types.push_back("string");
      if (kNumberKeys.count(k)) types.push_back("number");
    }
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    if (types.empty()) return any_value();
  }
  std::vector<Sequence> alts;
  for (const auto& t : types) alts.push_back({typed(s, t, path, depth)});
  if (alts.size() == 1) return alts[0][0];
  return b_.alt(std::move(alts), "types");
}

Symbol SchemaCompiler::typed(const ojson& s, const std::string& t, const std::string& path, int depth) {
  if (t == "null") return b_.alt({GrammarBuilder::literal("null")}, "null");
  if (t == "boolean") return b_.alt({GrammarBuilder::literal("true"), GrammarBuilder::literal("false")}, "boolean");
  if (t == "integer") return number(s, true, path);
  if (t == "number") return number(s, false, path);
  if (t == "string") return string(s, path);
  if (t == "array") return array(s, path, depth);
  if (t == "object") return object(s, path, depth);
  fail(path, "unknown type '" + t + "'");
}

Symbol SchemaCompiler::number(const ojson& s, bool integer, const std::string& path) {
  std::optional<double> lo, hi;
  bool lo_ex = false, hi_ex = false;
  auto num = [&](const char* k) {
    if (!s[k].is_number()) fail(path, std::string("'") + k + "' must be a number");
    return s[k].get<double>();
  };
  if (s.contains("minimum")) lo = num("minimum");
  if (s.contains("maximum")) hi = num("maximum");
  if (s.contains("exclusiveMinimum")) {
    if (s["exclusiveMinimum"].is_boolean()) {
      lo_ex = s["exclusiveMinimum"].get<bool>() && lo;
    } else if (double v = num("exclusiveMinimum"); !lo || v >= *lo) {
      lo = v, lo_ex = true;
    }
  }
  if (s.contains("exclusiveMaximum")) {
    if (s["exclusiveMaximum"].is_boolean()) {
      hi_ex = s["exclusiveMaximum"].get<bool>() && hi;
    } else if (double v = num("exclusiveMaximum"); !hi || v <= *hi) {
      hi = v, hi_ex = true;
    }
  }
  const double cap = static_cast<double>(kMaxMagnitude);
  if ((lo && *lo > cap) || (hi && *hi < -cap)) fail(path, "'minimum'/'maximum' outside the supported range +-1e15");
  std::vector<Sequence> alts;
  if (integer) {
    const double ilo = !lo ? -cap : lo_ex ? std::floor(*lo) + 1 : std::ceil(*lo);
    const double ihi = !hi ? cap : hi_ex ? std::ceil(*hi) - 1 : std::floor(*hi);
    if (ilo <= ihi) alts = integer_range(b_, static_cast<int64_t>(std::max(ilo, -cap)), static_cast<int64_t>(std::min(ihi, cap)));
  } else if (!lo && !hi) {
    return b_.alt({any_number(b_)}, "number");
  } else {
    alts = bounded_number(b_, lo, lo_ex, hi, hi_ex);
  }
  if (alts.empty()) fail(path, "'minimum'/'maximum' leave no " + std::string(integer ? "integer" : "number"));
  return b_.alt(std::move(alts), integer ? "integer" : "number");
}

Symbol SchemaCompiler::string(const ojson& s, const std::string& path) {
  const bool has_len = s.contains("minLength") || s.contains("maxLength");
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
    if (has_len) fail(path, "'pattern' combined with 'minLength'/'maxLength' is not supported");
    int32_t r;
    try {
      r = add_regex(b_, s["pattern"].get<std::string>(), RegexMode::kJsonString, limits_.max_repeat);
    } catch (const Error& e) {
      fail(path, std::string("'pattern': ") + e.what());
    }
    return b_.alt({{Symbol::byte('"'), Symbol::ref(r), Symbol::byte('"')}}, "pattern_string");
  }
  if (!has_len) return any_string();
  const int64_t min = s.contains("minLength") ? count(s, "minLength", path) : 0;
  const int64_t max = s.contains("maxLength") ? count(s, "maxLength", path) : -1;
  if (max >= 0 && max < min) fail(path, "'minLength' is greater than 'maxLength'");
  Sequence seq{Symbol::byte('"')};
  append(seq, b_.repeat({chars_.any_json_string_char()}, min, max, limits_.max_repeat));
  seq.push_back(Symbol::byte('"'));
  return b_.alt({seq}, "string");
}


}  // namespace schema_detail

int32_t add_json_schema(GrammarBuilder& builder, const ojson& schema, const CompileLimits& limits) {
  SchemaCompiler c(builder, schema, limits);
  const Symbol v = c.value(schema, "#", 0);
  return builder.add_rule("root", {{v}});
}

int32_t add_json_object(GrammarBuilder& builder) {
  const ojson empty = ojson::object();
  CompileLimits limits;
  SchemaCompiler c(builder, empty, limits);
  return builder.add_rule("root", {{c.any_object()}});
}

}  // namespace qs::constrained
