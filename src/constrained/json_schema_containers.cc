// Arrays and objects of the JSON Schema compiler (see json_schema_grammar.h for the semantics).
#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "constrained/grammar_compiler.h"
#include "constrained/json_schema_compiler.h"
#include "constrained/json_schema_merge.h"

namespace qs::constrained::schema_detail {

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
  const std::set<std::string> listed(names.begin(), names.end());  // a lookup per required name: O(log n)
  for (const auto& r : required) {
    if (listed.count(r) != 0) continue;
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


}  // namespace qs::constrained::schema_detail
