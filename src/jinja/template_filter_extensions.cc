// Filters beyond @huggingface/jinja, with Jinja2 semantics. They only apply where the reference
// would raise "unknown filter", so they never change output the reference can produce.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

// Python's round(x, ndigits) for floats: correctly rounded, ties to even on the exact binary
// value.
double python_round(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits == 0) return std::nearbyint(x);
  if (ndigits > 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", std::min(ndigits, 300), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, -ndigits);
  return std::nearbyint(x / scale) * scale;
}

Value round_filter(const Value& operand, const CallArgs& args) {
  const Value* precision = args.arg(0, "precision");
  const Value* method = args.arg(1, "method");
  if (precision && !precision->is_int()) fail("round precision must be an integer");
  const int digits = precision ? static_cast<int>(precision->number()) : 0;
  const std::string how = method && method->is_string() ? method->str() : "common";
  if (how != "common" && how != "ceil" && how != "floor")
    fail("round method must be common, ceil or floor");
  const double x = operand.is_bool() ? (operand.bool_value() ? 1 : 0) : operand.number();
  double result = 0;
  if (how == "common") {
    result = python_round(x, digits);
  } else {
    const double scale = std::pow(10.0, digits);
    result = (how == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale;
  }
  return operand.is_float() || how != "common" ? Value::floating(result) : Value::integer(result);
}

Value select_filter(const std::string& name, const Value& operand, const CallArgs& args) {
  const bool select = name == "select";
  CallArgs test_args;
  if (args.positional.size() > 1)
    test_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  Array out;
  for (const Value& item : operand.items()) {
    bool passed = item.truthy();
    if (!args.positional.empty()) {
      if (!args.positional[0].is_string()) fail("the test name of " + name + " must be a string");
      passed = run_test(args.positional[0].str(), item, test_args);
    }
    if (passed == select) out.push_back(item);
  }
  return Value::array(std::move(out));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// map('filter', args...): applies another filter to every item.
Value map_filter(Evaluator& ev, const Node& filter, const Value& operand, const CallArgs& args,
                 Environment& env) {
  if (args.positional.empty() || !args.positional[0].is_string())
    fail("map needs attribute= or the name of a filter");
  Node inner(NodeKind::kFilter, filter.line);
  inner.text = args.positional[0].str();
  inner.flag = args.positional.size() > 1;
  for (size_t i = 1; i < args.positional.size(); ++i) {
    inner.items.push_back(std::make_unique<Node>(NodeKind::kLiteral, filter.line));
    inner.items.back()->value = args.positional[i];
  }
  Array out;
  for (const Value& item : operand.items()) out.push_back(apply_filter(ev, inner, item, env));
  return Value::array(std::move(out));
}

Value code_point_list(const std::string& s) {
  Array out;
  for (std::string_view point : text::code_points(s))
    out.push_back(Value::string(std::string(point)));
  return Value::array(std::move(out));
}

std::optional<Value> string_extension(const std::string& name, const Value& operand,
                                      const CallArgs& args) {
  const auto points = text::code_points(operand.str());
  if (name == "trim") {
    const Value* chars = args.arg(0, "chars");
    if (chars && chars->is_string())
      return Value::string(strip_chars(operand.str(), chars->str(), true, true));
    return Value::string(std::string(text::trim(operand.str())));
  }
  if (name == "first") return points.empty() ? Value() : Value::string(std::string(points.front()));
  if (name == "last") return points.empty() ? Value() : Value::string(std::string(points.back()));
  if (name == "list") return code_point_list(operand.str());
  if (name == "reverse") {
    std::string out;
    for (auto it = points.rbegin(); it != points.rend(); ++it) out += *it;
    return Value::string(std::move(out));
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> extension_filter(Evaluator& ev, const Node& filter, const Value& operand,
                                      Environment& env) {
  const std::string& name = filter.text;
  const CallArgs args = ev.eval_args(filter.items, env);
  if (name == "default" || name == "d") {
    const Value fallback = args.positional.empty() ? Value::string("") : args.positional[0];
    const Value* boolean = args.arg(1, "boolean");
    const bool use = operand.is_undefined() || (boolean && boolean->truthy() && !operand.truthy());
    return use ? fallback : operand;
  }
  if (name == "count" || name == "length") {
    if (operand.is_undefined()) return Value::integer(0);
    if (operand.is_string())
      return Value::integer(static_cast<double>(text::utf16_length(operand.str())));
    if (operand.is_array()) return Value::integer(static_cast<double>(operand.items().size()));
    if (operand.has_fields()) return Value::integer(static_cast<double>(operand.fields().size()));
  }
  if (name == "round" && (operand.is_number() || operand.is_bool()))
    return round_filter(operand, args);
  if ((name == "select" || name == "reject") && operand.is_array())
    return select_filter(name, operand, args);
  if (name == "map" && operand.is_array()) return map_filter(ev, filter, operand, args, env);
  if (name == "escape" || name == "e") {
    return Value::string(operand.is_undefined()
                             ? ""
                             : html_escape(operand.is_null() ? "None" : print_string(operand)));
  }
  if (operand.is_string()) {
    if (auto result = string_extension(name, operand, args)) return result;
  }
  if (name == "list" && operand.is_object())
    return builtin_member(operand, "keys")->function_value()({}, env);
  if (name == "string") {
    if (operand.is_undefined()) return Value::string("");
    return Value::string(operand.is_null() ? "None" : print_string(operand));
  }
  return std::nullopt;
}

}  // namespace qs::chat
