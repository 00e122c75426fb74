// Builtin members: string methods (upper, lower, strip, lstrip, rstrip, title, capitalize,
// startswith, endswith, split, replace, length), dict methods (get, items, keys, values,
// dictsort) and array length.
#include <algorithm>
#include <cmath>
#include <limits>

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

using Method = Value (*)(const Value& self, const CallArgs& args);

Value bind(const Value& self, Method method) {
  return Value::function(
      [self, method](const CallArgs& args, Environment&) { return method(self, args); });
}

// strip/lstrip/rstrip: JavaScript whitespace trimming without an argument (as the reference),
// Python's strip-these-characters with a string argument.
Value strip_method(const Value& self, const CallArgs& args, bool left, bool right) {
  const Value* chars = args.arg(0, "chars");
  if (chars && chars->is_string())
    return Value::string(strip_chars(self.str(), chars->str(), left, right));
  std::string_view s = self.str();
  if (left) s = text::trim_start(s);
  if (right) s = text::trim_end(s);
  return Value::string(std::string(s));
}

Value affix_method(const Value& self, const CallArgs& args, bool prefix) {
  const char* name = prefix ? "startswith" : "endswith";
  if (args.positional.empty()) fail(std::string(name) + "() requires at least one argument");
  const auto matches = [&](const Value& pattern) {
    if (!pattern.is_string()) fail(std::string(name) + "() tuple elements must be strings");
    const std::string& s = self.str();
    const std::string& p = pattern.str();
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0
                  : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  const Value& pattern = args.positional[0];
  if (pattern.is_string()) return Value::boolean(matches(pattern));
  if (!pattern.is_array())
    fail(std::string(name) + "() argument must be a string or tuple of strings");
  for (const Value& item : pattern.items()) {
    if (matches(item)) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Array split_whitespace(const std::string& value, double maxsplit) {
  Array parts;
  const std::string_view s = text::trim_start(value);
  size_t pos = 0;
  while (pos < s.size()) {
    pos += text::space_run(s, pos);
    if (pos >= s.size()) break;
    if (maxsplit != -1 && static_cast<double>(parts.size()) >= maxsplit) {
      parts.push_back(Value::string(std::string(s.substr(pos))));
      break;
    }
    size_t end = pos;
    while (end < s.size()) {
      size_t next = end;
      if (text::is_js_space(text::decode_utf8(s, next))) break;
      end = next;
    }
    parts.push_back(Value::string(std::string(s.substr(pos, end - pos))));
    pos = end;
  }
  return parts;
}

Array split_separator(const std::string& s, const std::string& sep, double maxsplit) {
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t found; (found = s.find(sep, start)) != std::string::npos; start = found + sep.size())
    pieces.push_back(s.substr(start, found - start));
  pieces.push_back(s.substr(start));
  if (maxsplit != -1 && static_cast<double>(pieces.size()) > maxsplit) {
    const size_t keep = static_cast<size_t>(std::max(0.0, maxsplit));
    std::string rest;
    for (size_t i = keep; i < pieces.size(); ++i) rest += (i > keep ? sep : "") + pieces[i];
    pieces.resize(keep);
    pieces.push_back(rest);
  }
  Array parts;
  for (std::string& piece : pieces) parts.push_back(Value::string(std::move(piece)));
  return parts;
}

// str.split(sep=None, maxsplit=-1) with Python semantics, as the reference implements it.
Value split_method(const Value& self, const CallArgs& args) {
  const Value* sep = args.arg(0, "sep");
  const Value* maxsplit = args.arg(1, "maxsplit");
  if (sep && !sep->is_string() && !sep->is_null()) fail("sep argument must be a string or null");
  if (maxsplit && !maxsplit->is_int()) fail("maxsplit argument must be a number");
  const double limit = maxsplit ? maxsplit->number() : -1;
  if (!sep || sep->is_null()) return Value::array(split_whitespace(self.str(), limit));
  if (sep->str().empty()) fail("empty separator");
  return Value::array(split_separator(self.str(), sep->str(), limit));
}

// str.replace(old, new, count=None); an empty `old` inserts between code points.
Value replace_method(const Value& self, const CallArgs& args) {
  if (args.positional.size() < 2) fail("replace() requires at least two arguments");
  const Value& from = args.positional[0];
  const Value& to = args.positional[1];
  if (!from.is_string() || !to.is_string()) fail("replace() arguments must be strings");
  const Value* count = args.arg(2, "count");
  if (count && !count->is_int() && !count->is_null())
    fail("replace() count argument must be a number or null");
  double remaining = (!count || count->is_null() || count->number() < 0)
                         ? std::numeric_limits<double>::infinity()
                         : count->number();
  const std::string& s = self.str();
  std::string out;
  if (from.str().empty()) {
    for (std::string_view point : text::code_points(s)) {
      if (remaining-- > 0) out += to.str();
      out += point;
    }
    if (remaining > 0) out += to.str();
    return Value::string(std::move(out));
  }
  size_t start = 0;
  for (size_t found; remaining > 0 && (found = s.find(from.str(), start)) != std::string::npos;
       --remaining) {
    out.append(s, start, found - start);
    out += to.str();
    start = found + from.str().size();
  }
  out.append(s, start, std::string::npos);
  return Value::string(std::move(out));
}

std::optional<Value> string_member(const Value& self, const std::string& name) {
  if (name == "length") return Value::integer(static_cast<double>(text::utf16_length(self.str())));
  if (name == "upper")
    return bind(self, [](const Value& s, const CallArgs&) {
      return Value::string(text::to_upper(s.str()));
    });
  if (name == "lower")
    return bind(self, [](const Value& s, const CallArgs&) {
      return Value::string(text::to_lower(s.str()));
    });
  if (name == "title")
    return bind(self, [](const Value& s, const CallArgs&) {
      return Value::string(text::title_case(s.str()));
    });
  if (name == "capitalize")
    return bind(self, [](const Value& s, const CallArgs&) {
      return Value::string(text::capitalize(s.str()));
    });
  if (name == "strip")
    return bind(self,
                [](const Value& s, const CallArgs& a) { return strip_method(s, a, true, true); });
  if (name == "lstrip")
    return bind(self,
                [](const Value& s, const CallArgs& a) { return strip_method(s, a, true, false); });
  if (name == "rstrip")
    return bind(self,
                [](const Value& s, const CallArgs& a) { return strip_method(s, a, false, true); });
  if (name == "startswith")
    return bind(self, [](const Value& s, const CallArgs& a) { return affix_method(s, a, true); });
  if (name == "endswith")
    return bind(self, [](const Value& s, const CallArgs& a) { return affix_method(s, a, false); });
  if (name == "split") return bind(self, split_method);
  if (name == "replace") return bind(self, replace_method);
  return std::nullopt;
}

Value pairs_of(const Value& self) {
  Array pairs;
  for (const auto& [key, value] : self.fields().entries())
    pairs.push_back(Value::array({Value::string(key), value}));
  return Value::array(std::move(pairs));
}

Value dictsort_method(const Value& self, const CallArgs& args) {
  const Value* case_sensitive = args.arg(0, "case_sensitive");
  const Value* by = args.arg(1, "by");
  const Value* reverse = args.arg(2, "reverse");
  if (case_sensitive && !case_sensitive->is_bool()) fail("case_sensitive must be a boolean");
  if (by && (!by->is_string() || (by->str() != "key" && by->str() != "value")))
    fail("by must be either 'key' or 'value'");
  if (reverse && !reverse->is_bool()) fail("reverse must be a boolean");
  const size_t index = by && by->str() == "value" ? 1 : 0;
  const bool sensitive = case_sensitive && case_sensitive->bool_value();
  const bool descending = reverse && reverse->bool_value();
  Value pairs = pairs_of(self);
  std::stable_sort(pairs.items().begin(), pairs.items().end(), [&](const Value& a, const Value& b) {
    const int order = compare_values(a.items()[index], b.items()[index], sensitive);
    return descending ? order > 0 : order < 0;
  });
  return pairs;
}

Value get_method(const Value& self, const CallArgs& args) {
  const Value key = args.positional.empty() ? Value() : args.positional[0];
  if (!key.is_string()) fail(std::string("Object key must be a string: got ") + key.type_name());
  if (const Value* found = self.fields().find(key.str())) return *found;
  return args.positional.size() > 1 ? args.positional[1] : Value::null();
}

std::optional<Value> object_member(const Value& self, const std::string& name) {
  if (name == "get") return bind(self, get_method);
  if (name == "items")
    return bind(self, [](const Value& s, const CallArgs&) { return pairs_of(s); });
  if (name == "keys") {
    return bind(self, [](const Value& s, const CallArgs&) {
      Array keys;
      for (const auto& [key, value] : s.fields().entries()) keys.push_back(Value::string(key));
      return Value::array(std::move(keys));
    });
  }
  if (name == "values") {
    return bind(self, [](const Value& s, const CallArgs&) {
      Array values;
      for (const auto& [key, value] : s.fields().entries()) values.push_back(value);
      return Value::array(std::move(values));
    });
  }
  if (name == "dictsort") return bind(self, dictsort_method);
  return std::nullopt;
}

}  // namespace

std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  const auto set = text::code_points(chars);
  const auto points = text::code_points(s);
  const auto in_set = [&](std::string_view p) {
    return std::find(set.begin(), set.end(), p) != set.end();
  };
  size_t begin = 0;
  size_t end = points.size();
  while (left && begin < end && in_set(points[begin])) ++begin;
  while (right && end > begin && in_set(points[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out += points[i];
  return out;
}

std::optional<Value> builtin_member(const Value& object, const std::string& name) {
  if (object.is_string()) return string_member(object, name);
  if (object.is_object()) return object_member(object, name);
  if (object.is_array() && name == "length")
    return Value::integer(static_cast<double>(object.items().size()));
  return std::nullopt;
}

}  // namespace qs::chat
