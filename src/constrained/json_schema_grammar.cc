#include "constrained/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "constrained/char_classes.h"
#include "constrained/grammar_compiler.h"
#include "constrained/json_number_grammar.h"
#include "constrained/json_schema_merge.h"
#include "constrained/regex_grammar.h"
#include "core/error.h"

namespace qs::constrained {

namespace {

using ojson = nlohmann::ordered_json;

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

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const ojson& doc, const CompileLimits& limits)
      : b_(b), doc_(doc), limits_(limits), chars_(b, true) {}

  Symbol value(const ojson& s, const std::string& path, int depth);
  Symbol value_uncached(const ojson& s, const std::string& path, int depth);
  Symbol any_value();
  Symbol any_object();

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error("json_schema: " + what + " at " + path);
  }
  Symbol literal_json(const ojson& v) { return b_.alt({GrammarBuilder::literal(v.dump())}, "const"); }
  Symbol ref(const std::string& ref, const std::string& path, int depth);
  const ojson& resolve(const std::string& ref, const std::string& path) const;
  ojson resolve_member(const ojson& m, const std::string& path, int depth) const;
  Symbol typed(const ojson& s, const std::string& type, const std::string& path, int depth);
  Symbol number(const ojson& s, bool integer, const std::string& path);
  Symbol string(const ojson& s, const std::string& path);
  Symbol array(const ojson& s, const std::string& path, int depth);
  Symbol object(const ojson& s, const std::string& path, int depth);
  Symbol key_not_in(const std::vector<std::string>& names, size_t depth);
  int64_t count(const ojson& s, const char* key, const std::string& path) const;
  Symbol any_string() {
    if (any_string_ < 0) {
      any_string_ = b_.add_rule("string", {{Symbol::byte('"'), b_.star({chars_.any_json_string_char()}), Symbol::byte('"')}});
    }
    return Symbol::ref(any_string_);
  }

  GrammarBuilder& b_;
  const ojson& doc_;
  const CompileLimits& limits_;
  CharEmitter chars_;
  std::map<std::string, int32_t> refs_;
  std::map<std::string, Symbol> memo_;  // compact dump of a sub-schema -> its symbol
  int32_t any_value_ = -1, any_object_ = -1, any_string_ = -1;
};

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

Symbol SchemaCompiler::array(const ojson& s, const std::string& path, int depth) {
  std::vector<Symbol> prefix;
  std::optional<Symbol> rest;  // schema of the items after the prefix; none: no more items
  const ojson* rest_schema = nullptr;
  if (s.contains("prefixItems") || (s.contains("items") && s["items"].is_array())) {
    const char* key = s.contains("prefixItems") ? "prefixItems" : "items";
    const ojson& list = s[key];
    if (!list.is_array()) fail(path, "'prefixItems' must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      prefix.push_back(value(list[i], path + "/" + key + "/" + std::to_string(i), depth + 1));
    }
    const char* rest_key = s.contains("prefixItems") ? "items" : "additionalItems";
    if (s.contains(rest_key)) rest_schema = &s[rest_key];
  } else if (s.contains("items")) {
    rest_schema = &s["items"];
  }
  if (rest_schema == nullptr) {
    rest = any_value();
  } else if (!(rest_schema->is_boolean() && !rest_schema->get<bool>())) {
    rest = value(*rest_schema, path + "/items", depth + 1);
  }
  const int64_t p = static_cast<int64_t>(prefix.size());
  const int64_t min = s.contains("minItems") ? count(s, "minItems", path) : 0;
  int64_t max = s.contains("maxItems") ? count(s, "maxItems", path) : -1;
  if (max >= 0 && max < min) fail(path, "'minItems' is greater than 'maxItems'");
  if (!rest) {
    if (min > p) fail(path, "'minItems' exceeds the number of prefixItems while no other items are allowed");
    max = max < 0 ? p : std::min(max, p);
  }
  const Symbol comma = Symbol::byte(',');
  // tail(i): the items from index i on, i items already written.
  std::function<Sequence(int64_t)> tail = [&](int64_t i) -> Sequence {
    if (max >= 0 && i >= max) return {};
    if (i >= p) {
      if (!rest) return {};
      const int64_t more_min = std::max<int64_t>(0, min - i);
      const int64_t more_max = max < 0 ? -1 : max - i;
      if (i > 0) return {b_.alt({b_.repeat({comma, *rest}, more_min, more_max, limits_.max_repeat)}, "items")};
      Sequence first{*rest};
      append(first, b_.repeat({comma, *rest}, std::max<int64_t>(0, more_min - 1),
                               more_max < 0 ? -1 : more_max - 1, limits_.max_repeat));
      if (more_min > 0) return {b_.alt({first}, "items")};
      return {b_.opt(first)};
    }
    Sequence item;
    if (i > 0) item.push_back(comma);
    item.push_back(prefix[static_cast<size_t>(i)]);
    append(item, tail(i + 1));
    if (i >= min) return {b_.opt(item)};
    return {b_.alt({item}, "item")};
  };
  Sequence seq{Symbol::byte('[')};
  append(seq, tail(0));
  seq.push_back(Symbol::byte(']'));
  return b_.alt({seq}, "array");
}

Symbol SchemaCompiler::key_not_in(const std::vector<std::string>& names, size_t depth) {
  // Printable ASCII except '"' and '\\'.
  ByteSet free;
  free.add_range(0x20, 0x7E);
  const ByteSet quote = ByteSet::of('"'), backslash = ByteSet::of('\\');
  free.words[0] &= ~quote.words[0];
  free.words[1] &= ~backslash.words[1];
  bool terminal = false;
  std::map<uint8_t, std::vector<std::string>> children;
  for (const auto& n : names) {
    if (n.size() == depth) terminal = true;
    else children[static_cast<uint8_t>(n[depth])].push_back(n);
  }
  std::vector<Sequence> alts;
  if (!terminal) alts.push_back({Symbol::byte('"')});
  ByteSet other = free;
  for (auto& [c, sub] : children) {
    if (!free.has(c)) continue;
    other.words[c >> 6] &= ~(uint64_t{1} << (c & 63));
    alts.push_back({Symbol::byte(c), key_not_in(sub, depth + 1)});
  }
  if (!other.empty()) alts.push_back({Symbol::set(other), b_.star({Symbol::set(free)}), Symbol::byte('"')});
  return b_.alt(std::move(alts), "key");
}

Symbol SchemaCompiler::object(const ojson& s, const std::string& path, int depth) {
  struct Prop {
    std::string name;
    Symbol value;
    bool required;
  };
  std::vector<Prop> props;
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) fail(path, "'required' must be an array");
    for (const auto& r : s["required"]) {
      if (!r.is_string()) fail(path, "'required' entries must be strings");
      required.insert(r.get<std::string>());
    }
  }
  const bool has_props = s.contains("properties");
  if (has_props && !s["properties"].is_object()) fail(path, "'properties' must be an object");
  // additionalProperties: absent -> none when properties are listed, any otherwise.
  const ojson* addl = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  const bool addl_allowed = addl ? !(addl->is_boolean() && !addl->get<bool>()) : !has_props;
  std::optional<Symbol> addl_value;
  auto additional_value = [&]() {
    if (!addl_value) {
      addl_value = (addl && addl->is_object()) ? value(*addl, path + "/additionalProperties", depth + 1)
                                               : any_value();
    }
    return *addl_value;
  };
  std::vector<std::string> names;
  if (has_props) {
    for (const auto& [k, v] : s["properties"].items()) {
      names.push_back(k);
      // An optional property whose schema is false can only be absent.
      if (v.is_boolean() && !v.get<bool>() && !required.count(k)) continue;
      props.push_back({k, value(v, path + "/properties/" + k, depth + 1), required.count(k) != 0});
    }
  }
  for (const auto& r : required) {
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    if (!addl_allowed) fail(path, "required property '" + r + "' is forbidden by 'additionalProperties': false");
    props.push_back({r, additional_value(), true});
    names.push_back(r);
  }
  std::vector<std::string> escaped;
  for (const auto& n : names) {
    const std::string d = ojson(n).dump();
    escaped.push_back(d.substr(1, d.size() - 2));
  }
  std::optional<Symbol> extra;  // one extra "key":value
  if (addl_allowed) {
    const Symbol key = names.empty() ? any_string() : b_.alt({{Symbol::byte('"'), key_not_in(escaped, 0)}}, "extra_key");
    extra = b_.alt({{key, Symbol::byte(':'), additional_value()}}, "extra_member");
  }
  const Symbol comma = Symbol::byte(',');
  // ne(i): members from property i on, after something was written; em(i): nothing written yet.
  Sequence ne, em;
  if (extra) {
    ne = {b_.star({comma, *extra})};
    em = {b_.opt({*extra, b_.star({comma, *extra})})};
  }
  for (size_t k = props.size(); k-- > 0;) {
    const Prop& pr = props[k];
    Sequence kv = GrammarBuilder::literal(ojson(pr.name).dump() + ":");
    kv.push_back(pr.value);
    const Symbol ne_next = b_.alt({ne}, "members"), em_next = b_.alt({em}, "members");
    Sequence with_comma{comma};
    append(with_comma, kv);
    with_comma.push_back(ne_next);
    Sequence first = kv;
    first.push_back(ne_next);
    if (pr.required) {
      ne = with_comma;
      em = first;
    } else {
      ne = {b_.alt({with_comma, {ne_next}}, "members")};
      em = {b_.alt({first, {em_next}}, "members")};
    }
  }
  Sequence seq{Symbol::byte('{')};
  append(seq, em);
  seq.push_back(Symbol::byte('}'));
  return b_.alt({seq}, "object");
}

}  // namespace

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
