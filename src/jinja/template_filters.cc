// Filters. `name` without parentheses and `name(...)` are separate cases in the reference (for
// example `|int` floors floats while `|int()` returns numbers unchanged); both are mirrored.
// Filters the reference lacks follow Jinja2 (see extension_filter).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

Value length_of(const Value& v) {
  if (v.is_string()) return Value::integer(static_cast<double>(text::utf16_length(v.str())));
  if (v.is_array()) return Value::integer(static_cast<double>(v.items().size()));
  return Value::integer(static_cast<double>(v.fields().size()));
}

// join over array items: the JavaScript Array.join conversion (null/undefined as "").
std::string join_items(const Array& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    if (!items[i].is_null() && !items[i].is_undefined()) out += raw_string(items[i]);
  }
  return out;
}

std::string indent_lines(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    const size_t end = s.find('\n', start);
    const std::string_view piece = std::string_view(s).substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    if (!((!first && line == 0) || (!blank && piece.empty()))) out += pad;
    out += piece;
    if (end == std::string::npos) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

// A dotted attribute path ("a.b", "items.0") through objects and arrays; undefined if missing.
Value attribute_path(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current.has_fields()) {
      const Value* field = current.fields().find(part);
      current = field ? *field : Value();
    } else if (current.is_array()) {
      const auto index = text::parse_js_int(part);
      if (!index || *index < 0 || *index >= static_cast<double>(current.items().size()))
        return Value();
      current = current.items()[static_cast<size_t>(*index)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

Value sorted(const Value& operand, bool reverse, bool case_sensitive, const Value& attribute) {
  Array items = operand.items();
  const auto key = [&](const Value& v) {
    if (attribute.is_null()) return v;
    return attribute_path(
        v, attribute.is_int() ? text::format_js_number(attribute.number()) : attribute.str());
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int order = compare_values(key(a), key(b), case_sensitive);
    return reverse ? order > 0 : order < 0;
  });
  return Value::array(std::move(items));
}

Value unique(const Value& operand) {
  Array out;
  for (const Value& item : operand.items()) {
    const bool seen = std::any_of(out.begin(), out.end(),
                                  [&](const Value& o) { return same_value_zero(o, item); });
    if (!seen) out.push_back(item);
  }
  return Value::array(std::move(out));
}

std::optional<Value> plain_array_filter(const std::string& name, const Value& operand) {
  const Array& items = operand.items();
  if (name == "list") return operand;
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "length") return length_of(operand);
  if (name == "reverse") return Value::array(Array(items.rbegin(), items.rend()));
  if (name == "sort") return sorted(operand, false, false, Value::null());
  if (name == "join") return Value::string(join_items(items, ""));
  if (name == "string") return Value::string(to_json(operand, JsonOptions{}, false));
  if (name == "unique") return unique(operand);
  return std::nullopt;
}

std::optional<Value> plain_string_filter(const std::string& name, const Value& operand) {
  const std::string& s = operand.str();
  if (name == "length") return length_of(operand);
  if (name == "upper") return Value::string(text::to_upper(s));
  if (name == "lower") return Value::string(text::to_lower(s));
  if (name == "title") return Value::string(text::title_case(s));
  if (name == "capitalize") return Value::string(text::capitalize(s));
  if (name == "trim") return Value::string(std::string(text::trim(s)));
  if (name == "indent") return Value::string(indent_lines(s, "    ", false, false));
  if (name == "join" || name == "string") return operand;
  if (name == "int") return Value::integer(text::parse_js_int(s).value_or(0));
  if (name == "float") return Value::floating(text::parse_js_float(s).value_or(0));
  return std::nullopt;
}

std::optional<Value> plain_scalar_filter(const std::string& name, const Value& operand) {
  if (operand.is_number()) {
    const double v = operand.number();
    if (name == "abs")
      return operand.is_int() ? Value::integer(std::fabs(v)) : Value::floating(std::fabs(v));
    if (name == "int") return Value::integer(std::floor(v));
    if (name == "float") return Value::floating(v);
    if (name == "string") return Value::string(print_string(operand));
    return std::nullopt;
  }
  const bool b = operand.bool_value();
  if (name == "bool") return operand;
  if (name == "int") return Value::integer(b ? 1 : 0);
  if (name == "float") return Value::floating(b ? 1 : 0);
  if (name == "string") return Value::string(b ? "true" : "false");
  return std::nullopt;
}

// Filters written without parentheses, as the reference implements them.
std::optional<Value> plain_filter(const std::string& name, const Value& operand, Environment& env) {
  if (name == "safe") return operand;
  if (name == "tojson") return Value::string(to_json(operand, JsonOptions{}));
  if (operand.is_array()) return plain_array_filter(name, operand);
  if (operand.is_string()) return plain_string_filter(name, operand);
  if (operand.is_number() || operand.is_bool()) return plain_scalar_filter(name, operand);
  if (operand.is_object()) {
    if (name == "length") return length_of(operand);
    if (auto member = builtin_member(operand, name))
      return member->is_function() ? member->function_value()({}, env) : *member;
  }
  return std::nullopt;
}

Value tojson_filter(const Value& operand, const CallArgs& args) {
  JsonOptions options;
  const Value* indent = args.keyword_arg("indent");
  const Value* ensure_ascii = args.keyword_arg("ensure_ascii");
  const Value* sort_keys = args.keyword_arg("sort_keys");
  const Value* separators = args.keyword_arg("separators");
  if (indent && !indent->is_int() && !indent->is_null()) fail("If set, indent must be a number");
  if (indent && indent->is_int()) options.indent = static_cast<int>(indent->number());
  if (ensure_ascii && !ensure_ascii->is_bool()) fail("If set, ensure_ascii must be a boolean");
  options.ensure_ascii = ensure_ascii && ensure_ascii->bool_value();
  if (sort_keys && !sort_keys->is_bool()) fail("If set, sort_keys must be a boolean");
  options.sort_keys = sort_keys && sort_keys->bool_value();
  if (separators && separators->is_array()) {
    const Array& pair = separators->items();
    if (pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
      fail("separators must be a tuple of two strings");
    options.separators = std::make_pair(pair[0].str(), pair[1].str());
  } else if (separators && !separators->is_null()) {
    fail("If set, separators must be a tuple of two strings");
  }
  return Value::string(to_json(operand, options));
}

Value number_conversion_filter(const std::string& name, const Value& operand,
                               const CallArgs& args) {
  const Value* given = args.arg(0, "default");
  const Value fallback = given ? *given : name == "int" ? Value::integer(0) : Value::floating(0);
  if (operand.is_string()) {
    const auto parsed =
        name == "int" ? text::parse_js_int(operand.str()) : text::parse_js_float(operand.str());
    if (!parsed) return fallback;
    return name == "int" ? Value::integer(*parsed) : Value::floating(*parsed);
  }
  if (operand.is_number()) return operand;
  if (operand.is_bool()) {
    const double v = operand.bool_value() ? 1 : 0;
    return name == "int" ? Value::integer(v) : Value::floating(v);
  }
  fail("Cannot apply filter \"" + name + "\" to type: " + operand.type_name());
}

Value attr_select_filter(const Node& filter, const Value& operand) {
  const bool select = filter.text == "selectattr";
  for (const Value& item : operand.items()) {
    if (!item.has_fields()) fail("`" + filter.text + "` can only be applied to array of objects");
  }
  for (const NodePtr& arg : filter.items) {
    if (arg->kind != NodeKind::kLiteral || !arg->value.is_string())
      fail("arguments of `" + filter.text + "` must be strings");
  }
  if (filter.items.empty()) fail("`" + filter.text + "` requires an attribute name");
  const std::string attribute = filter.items[0]->value.str();
  CallArgs test_args;
  if (filter.items.size() > 2) test_args.positional.push_back(filter.items[2]->value);
  Array out;
  for (const Value& item : operand.items()) {
    const Value* field = item.fields().find(attribute);
    bool passed = false;
    if (field) {
      passed = filter.items.size() > 1 ? run_test(filter.items[1]->value.str(), *field, test_args)
                                       : field->truthy();
    }
    if (passed == select) out.push_back(item);
  }
  return Value::array(std::move(out));
}

std::optional<Value> map_attribute_filter(const Value& operand, const CallArgs& args) {
  const Value* attribute = args.keyword_arg("attribute");
  if (!attribute) return std::nullopt;
  if (!attribute->is_string()) fail("attribute must be a string");
  const Value* fallback = args.keyword_arg("default");
  Array out;
  for (const Value& item : operand.items()) {
    if (!item.has_fields()) fail("items in map must be an object");
    const Value value = attribute_path(item, attribute->str());
    out.push_back(value.is_undefined() && fallback ? *fallback : value);
  }
  return Value::array(std::move(out));
}

std::optional<Value> call_array_filter(Evaluator& ev, const Node& filter, const Value& operand,
                                       Environment& env) {
  const std::string& name = filter.text;
  if (name == "selectattr" || name == "rejectattr") return attr_select_filter(filter, operand);
  const CallArgs args = ev.eval_args(filter.items, env);
  if (name == "map") return map_attribute_filter(operand, args);
  if (name != "sort") return std::nullopt;
  const Value* reverse = args.arg(0, "reverse");
  const Value* case_sensitive = args.arg(1, "case_sensitive");
  const Value* attribute = args.arg(2, "attribute");
  if (reverse && !reverse->is_bool()) fail("reverse must be a boolean");
  if (case_sensitive && !case_sensitive->is_bool()) fail("case_sensitive must be a boolean");
  if (attribute && !attribute->is_string() && !attribute->is_int() && !attribute->is_null())
    fail("attribute must be a string, integer, or null");
  return sorted(operand, reverse && reverse->bool_value(),
                case_sensitive && case_sensitive->bool_value(),
                attribute ? *attribute : Value::null());
}

std::optional<Value> call_string_filter(const std::string& name, const Value& operand,
                                        const CallArgs& args, Environment& env) {
  if (name == "indent") {
    const Value* width = args.arg(0, "width");
    const Value* first = args.arg(1, "first");
    const Value* blank = args.arg(2, "blank");
    if (width && !width->is_int()) fail("width must be a number");
    const std::string pad(static_cast<size_t>(std::max(0.0, width ? width->number() : 4)), ' ');
    return Value::string(
        indent_lines(operand.str(), pad, first && first->truthy(), blank && blank->truthy()));
  }
  if (name == "replace") return builtin_member(operand, "replace")->function_value()(args, env);
  return std::nullopt;
}

// Filters written with parentheses, as the reference implements them.
std::optional<Value> call_filter(Evaluator& ev, const Node& filter, const Value& operand,
                                 Environment& env) {
  const std::string& name = filter.text;
  if (operand.is_array() &&
      (name == "selectattr" || name == "rejectattr" || name == "map" || name == "sort"))
    return call_array_filter(ev, filter, operand, env);
  const CallArgs args = ev.eval_args(filter.items, env);
  if (name == "tojson") return tojson_filter(operand, args);
  if (name == "join" && (operand.is_string() || operand.is_array())) {
    const Value* sep = args.arg(0, "separator");
    if (sep && !sep->is_string()) fail("separator must be a string");
    const std::string separator = sep ? sep->str() : "";
    if (operand.is_array()) return Value::string(join_items(operand.items(), separator));
    std::string out;
    for (std::string_view point : text::code_points(operand.str()))
      out += (out.empty() ? "" : separator) + std::string(point);
    return Value::string(std::move(out));
  }
  if (name == "int" || name == "float") return number_conversion_filter(name, operand, args);
  if (name == "default") {
    const Value fallback = args.positional.empty() ? Value::string("") : args.positional[0];
    const Value* boolean = args.arg(1, "boolean");
    if (boolean && !boolean->is_bool()) fail("`default` filter flag must be a boolean");
    const bool use =
        operand.is_undefined() || (boolean && boolean->bool_value() && !operand.truthy());
    return use ? fallback : operand;
  }
  if (operand.is_string()) return call_string_filter(name, operand, args, env);
  if (operand.is_object()) {
    const auto member = builtin_member(operand, name);
    if (member && member->is_function()) return member->function_value()(args, env);
  }
  return std::nullopt;
}

}  // namespace

Value apply_filter(Evaluator& evaluator, const Node& filter, const Value& operand,
                   Environment& env) {
  const auto result = filter.flag ? call_filter(evaluator, filter, operand, env)
                                  : plain_filter(filter.text, operand, env);
  if (result) return *result;
  if (auto extended = extension_filter(evaluator, filter, operand, env)) return *extended;
  fail("Unknown filter \"" + filter.text + "\" for " + operand.type_name());
}

}  // namespace qs::chat
