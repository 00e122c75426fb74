#include "constrained/json_schema_merge.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace qs::constrained {

using ojson = nlohmann::ordered_json;

bool is_schema_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "title",    "description", "$schema",  "$id",       "$comment",  "default",
      "examples", "deprecated",  "readOnly", "writeOnly", "$defs",     "definitions"};
  return kAnnotations.count(k) != 0;
}

namespace {

// An object's members as the vector ordered_map derives from: appending a key known to be new
// and indexing by position skip ordered_map's linear scan for the key (which made merging
// objects of N properties cost O(N^2)).
using Members = ojson::object_t::Container;
Members& members_of(ojson& object) { return object.get_ref<ojson::object_t&>(); }

// Unites property maps: a property in both becomes {"allOf": [theirs, ours]} unless equal.
void merge_properties(ojson& cur, const ojson& add) {
  Members& members = members_of(cur);
  std::unordered_map<std::string, size_t> position;
  for (size_t i = 0; i < members.size(); ++i) position.emplace(members[i].first, i);
  for (const auto& [pk, pv] : add.items()) {
    if (auto it = position.find(pk); it != position.end()) {
      ojson& existing = members[it->second].second;
      if (existing != pv) existing = ojson{{"allOf", ojson::array({existing, pv})}};
    } else {
      position.emplace(pk, members.size());
      members.emplace_back(pk, pv);
    }
  }
}

// Appends the entries of `add` missing from the array `cur`, in order.
void unite_required(ojson& cur, const ojson& add) {
  std::unordered_set<std::string> present;
  for (const auto& r : cur) {
    if (r.is_string()) present.insert(r.get<std::string>());
  }
  for (const auto& r : add) {
    if (r.is_string() ? present.insert(r.get<std::string>()).second : std::find(cur.begin(), cur.end(), r) == cur.end()) {
      cur.push_back(r);
    }
  }
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("json_schema: allOf: " + what + " at " + path);
}

std::vector<std::string> type_list(const ojson& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array()) {
    for (const auto& x : t) {
      if (x.is_string()) out.push_back(x.get<std::string>());
    }
  }
  return out;
}

ojson intersect_types(const ojson& a, const ojson& b, const std::string& path) {
  ojson out = ojson::array();
  const auto la = type_list(a), lb = type_list(b);
  for (const auto& x : la) {
    for (const auto& y : lb) {
      if (x == y) out.push_back(x);
      else if ((x == "integer" && y == "number") || (x == "number" && y == "integer")) out.push_back("integer");
    }
  }
  if (out.empty()) fail(path, "'type' values do not intersect");
  return out;
}

void merge_into(ojson& a, const ojson& b, const std::string& path) {
  static const std::set<std::string> kLower = {"minimum", "minLength", "minItems"};
  static const std::set<std::string> kUpper = {"maximum", "maxLength", "maxItems"};
  for (const auto& [k, v] : b.items()) {
    if (is_schema_annotation(k)) continue;
    if (!a.contains(k)) {
      a[k] = v;
      continue;
    }
    ojson& cur = a[k];
    if (k == "properties" && cur.is_object() && v.is_object()) {
      merge_properties(cur, v);
    } else if (k == "required" && cur.is_array() && v.is_array()) {
      unite_required(cur, v);
    } else if (k == "type") {
      cur = intersect_types(cur, v, path);
    } else if (kLower.count(k) && cur.is_number() && v.is_number()) {
      if (v.get<double>() > cur.get<double>()) cur = v;
    } else if (kUpper.count(k) && cur.is_number() && v.is_number()) {
      if (v.get<double>() < cur.get<double>()) cur = v;
    } else if (k == "additionalProperties" && cur != v) {
      if (cur == false || v == false) cur = false;
      else fail(path, "cannot combine differing 'additionalProperties'");
    } else if (cur != v) {
      fail(path, "cannot combine differing '" + k + "'");
    }
  }
}

}  // namespace

ojson merge_schemas(const std::vector<ojson>& members, const std::string& path) {
  ojson merged = ojson::object();
  for (const auto& m : members) {
    if (m.is_boolean()) {
      if (!m.get<bool>()) fail(path, "a member is the false schema");
      continue;
    }
    if (!m.is_object()) fail(path, "members must be schema objects");
    merge_into(merged, m, path);
  }
  for (const auto& m : members) {
    if (!m.is_object() || !m.contains("additionalProperties") || m["additionalProperties"] != false) {
      continue;
    }
    if (!merged.contains("properties")) continue;
    std::unordered_set<std::string> own, required;
    if (m.contains("properties") && m["properties"].is_object()) {
      for (const auto& [pk, pv] : m["properties"].items()) own.insert(pk);
    }
    if (merged.contains("required") && merged["required"].is_array()) {
      for (const auto& r : merged["required"]) {
        if (r.is_string()) required.insert(r.get<std::string>());
      }
    }
    ojson kept = ojson::object();
    for (const auto& [pk, pv] : merged["properties"].items()) {
      if (own.count(pk) != 0) {
        members_of(kept).emplace_back(pk, pv);  // keys of one object: distinct
        continue;
      }
      if (required.count(pk) != 0) {
        fail(path, "property '" + pk + "' is required but a member has additionalProperties: false");
      }
    }
    merged["properties"] = kept;
  }
  return merged;
}

}  // namespace qs::constrained
