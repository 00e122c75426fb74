// Expression evaluation: literals, names, member access and slicing, calls, unary and binary
// operators, ternaries.
#include <algorithm>
#include <cmath>

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"
#include "jinja/template_evaluator.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

// Clamps an integral double to a range where conversion to long long is safe.
long long to_index(double value) {
  if (std::isnan(value)) return 0;
  return static_cast<long long>(std::clamp(value, -9.0e15, 9.0e15));
}

// The reference's slice(): Python-like bounds, except that with a negative step an explicit
// stop of -1 means "through the first element".
template <typename T>
std::vector<T> js_slice(const std::vector<T>& items, const Value& start_v, const Value& stop_v,
                        const Value& step_v) {
  const long long n = static_cast<long long>(items.size());
  const long long step = step_v.is_undefined() ? 1 : to_index(step_v.number());
  long long start = 0;
  long long stop = 0;
  if (step >= 0) {
    start = start_v.is_undefined() ? 0 : to_index(start_v.number());
    stop = stop_v.is_undefined() ? n : to_index(stop_v.number());
    start = start < 0 ? std::max(n + start, 0LL) : std::min(start, n);
    stop = stop < 0 ? std::max(n + stop, 0LL) : std::min(stop, n);
  } else {
    start = start_v.is_undefined() ? n - 1 : to_index(start_v.number());
    stop = stop_v.is_undefined() ? -1 : to_index(stop_v.number());
    start = start < 0 ? std::max(n + start, -1LL) : std::min(start, n - 1);
    stop = stop < -1 ? std::max(n + stop, -1LL) : std::min(stop, n - 1);
  }
  std::vector<T> out;
  const long long direction = step > 0 ? 1 : (step < 0 ? -1 : 0);
  for (long long i = start; direction * i < direction * stop; i += step)
    out.push_back(items[static_cast<size_t>(i)]);
  return out;
}

// Character at a UTF-16 index (negative counts from the end), like String.prototype.at.
Value string_at(const std::string& s, double index) {
  const auto points = text::code_points(s);
  const long long length = static_cast<long long>(text::utf16_length(s));
  long long i = to_index(index);
  if (i < 0) i += length;
  if (i < 0 || i >= length || std::isinf(index)) return Value();
  long long unit = 0;
  for (std::string_view point : points) {
    const long long width = point.size() == 4 ? 2 : 1;
    if (i < unit + width) return Value::string(std::string(point));
    unit += width;
  }
  return Value();
}

Value array_at(const Array& items, double index) {
  const long long n = static_cast<long long>(items.size());
  long long i = to_index(index);
  if (i < 0) i += n;
  if (i < 0 || i >= n || std::isinf(index)) return Value();
  return items[static_cast<size_t>(i)];
}

double numeric_value(const Value& v) { return v.is_bool() ? (v.bool_value() ? 1 : 0) : v.number(); }

Value power(const Value& left, const Value& right) {
  const double a = numeric_value(left);
  const double b = numeric_value(right);
  if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
  const double result = std::pow(a, b);
  if (!std::isfinite(result)) fail("Exponentiation result is not a finite real number");
  const bool is_float = left.is_float() || right.is_float() || b < 0;
  return is_float ? Value::floating(result) : Value::integer(result);
}

// Arithmetic and comparison between two numbers; nullopt for operators that do not apply.
std::optional<Value> numeric_operation(const std::string& op, const Value& left,
                                       const Value& right) {
  const double a = left.number();
  const double b = right.number();
  const bool is_float = left.is_float() || right.is_float();
  const auto number = [&](double v) { return is_float ? Value::floating(v) : Value::integer(v); };
  if (op == "+") return number(a + b);
  if (op == "-") return number(a - b);
  if (op == "*") return number(a * b);
  if (op == "/") return Value::floating(a / b);
  if (op == "//") return number(std::floor(a / b));
  if (op == "%") return number(std::fmod(a, b));
  if (op == "<") return Value::boolean(a < b);
  if (op == ">") return Value::boolean(a > b);
  if (op == ">=") return Value::boolean(a >= b);
  if (op == "<=") return Value::boolean(a <= b);
  return std::nullopt;
}

std::optional<Value> string_operation(const std::string& op, const Value& left,
                                      const Value& right) {
  if (op == "+" && (left.is_string() || right.is_string()))
    return Value::string(raw_string(left) + raw_string(right));
  if (!left.is_string()) return std::nullopt;
  if (right.is_string()) {
    const std::string& a = left.str();
    const std::string& b = right.str();
    if (op == "in") return Value::boolean(b.find(a) != std::string::npos);
    if (op == "not in") return Value::boolean(b.find(a) == std::string::npos);
    // Extension (the reference only compares numbers): Python string ordering.
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
  }
  if (right.is_object() && (op == "in" || op == "not in"))
    return Value::boolean((right.fields().find(left.str()) != nullptr) == (op == "in"));
  return std::nullopt;
}

// Every binary operator except and/or/==/!=, with the reference's type rules.
Value binary_operation(const std::string& op, const Value& left, const Value& right) {
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in"))
      return Value::boolean(op == "not in");
    fail("Cannot perform operation " + op + " on undefined values");
  }
  if (left.is_null() || right.is_null()) fail("Cannot perform operation on null values");
  if (op == "~") return Value::string(raw_string(left) + raw_string(right));
  const auto numeric_like = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (op == "**" && numeric_like(left) && numeric_like(right)) return power(left, right);
  if (left.is_number() && right.is_number()) {
    if (auto result = numeric_operation(op, left, right)) return *result;
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      Array joined = left.items();
      joined.insert(joined.end(), right.items().begin(), right.items().end());
      return Value::array(std::move(joined));
    }
  } else if (right.is_array() && (op == "in" || op == "not in")) {
    const bool member = std::any_of(right.items().begin(), right.items().end(),
                                    [&](const Value& item) { return strict_equals(item, left); });
    return Value::boolean(member == (op == "in"));
  }
  if (auto result = string_operation(op, left, right)) return *result;
  fail("Unknown operator \"" + op + "\" between " + left.type_name() + " and " + right.type_name());
}

}  // namespace

Value Evaluator::eval(const Node& node, Environment& env) {
  try {
    return eval_expression(node, env);
  } catch (TemplateError& e) {
    if (e.line() == 0) e.set_line(node.line);
    throw;
  }
}

Value Evaluator::eval_expression(const Node& node, Environment& env) {
  switch (node.kind) {
    case NodeKind::kLiteral: return node.value;
    case NodeKind::kIdentifier: return env.lookup(node.text);
    case NodeKind::kArray:
    case NodeKind::kTuple: {
      Array items;
      for (const NodePtr& item : node.items) items.push_back(eval(*item, env));
      return Value::array(std::move(items), node.kind == NodeKind::kTuple);
    }
    case NodeKind::kDict: return eval_dict(node, env);
    case NodeKind::kMember: return eval_member(node, env);
    case NodeKind::kCall: return eval_call(node, env);
    case NodeKind::kUnary: return eval_unary(node, env);
    case NodeKind::kBinary: return eval_binary(node, env);
    case NodeKind::kFilter: return apply_filter(*this, node, eval(*node.a, env), env);
    case NodeKind::kTest: {
      const Value operand = eval(*node.a, env);
      const bool result = run_test(node.text, operand, eval_args(node.items, env));
      return Value::boolean(node.flag ? !result : result);
    }
    case NodeKind::kSelect: return eval(*node.b, env).truthy() ? eval(*node.a, env) : Value();
    case NodeKind::kTernary:
      return eval(*node.a, env).truthy() ? eval(*node.b, env) : eval(*node.c, env);
    default: fail("unexpected syntax in an expression");
  }
}

Value Evaluator::eval_dict(const Node& node, Environment& env) {
  Object fields;
  for (size_t i = 0; i + 1 < node.items.size(); i += 2) {
    const Value key = eval(*node.items[i], env);
    if (!key.is_string()) fail(std::string("Object keys must be strings: got ") + key.type_name());
    fields.set(key.str(), eval(*node.items[i + 1], env));
  }
  return Value::object(std::move(fields));
}

Value Evaluator::eval_member(const Node& node, Environment& env) {
  const Value object = eval(*node.a, env);
  if (node.flag && node.b->kind == NodeKind::kSlice) return eval_slice(object, *node.b, env);
  const Value property = node.flag                            ? eval(*node.b, env)
                         : node.b->kind == NodeKind::kLiteral ? node.b->value
                                                              : Value::string(node.b->text);
  if (object.has_fields()) {
    if (!property.is_string())
      fail(std::string("Cannot access property with non-string: got ") + property.type_name());
    if (const Value* field = object.fields().find(property.str())) return *field;
    return object.is_object() ? builtin_member(object, property.str()).value_or(Value()) : Value();
  }
  if (object.is_array() || object.is_string()) {
    if (property.is_int())
      return object.is_array() ? array_at(object.items(), property.number())
                               : string_at(object.str(), property.number());
    if (property.is_string()) return builtin_member(object, property.str()).value_or(Value());
    fail(std::string("Cannot access property with non-string/non-number: got ") +
         property.type_name());
  }
  if (!property.is_string())
    fail(std::string("Cannot access property with non-string: got ") + property.type_name());
  return builtin_member(object, property.str()).value_or(Value());
}

Value Evaluator::eval_slice(const Value& object, const Node& slice, Environment& env) {
  if (!object.is_array() && !object.is_string()) fail("Slice object must be an array or string");
  const Value start = slice.a ? eval(*slice.a, env) : Value();
  const Value stop = slice.b ? eval(*slice.b, env) : Value();
  const Value step = slice.c ? eval(*slice.c, env) : Value();
  for (const Value* part : {&start, &stop, &step}) {
    if (!part->is_int() && !part->is_undefined())
      fail("Slice indices must be integers or undefined");
  }
  if (object.is_array()) return Value::array(js_slice(object.items(), start, stop, step));
  std::string out;
  for (std::string_view point : js_slice(text::code_points(object.str()), start, stop, step))
    out += point;
  return Value::string(std::move(out));
}

CallArgs Evaluator::eval_args(const NodeList& args, Environment& env) {
  CallArgs out;
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kSpread) {
      const Value items = eval(*arg->a, env);
      if (!items.is_array())
        fail(std::string("Cannot unpack non-iterable type: ") + items.type_name());
      out.positional.insert(out.positional.end(), items.items().begin(), items.items().end());
    } else if (arg->kind != NodeKind::kKeyword && arg->kind != NodeKind::kKeywordSpread) {
      out.positional.push_back(eval(*arg, env));
    }
  }
  const auto add_keyword = [&](const std::string& key, Value value) {
    if (out.keyword_arg(key)) fail("Got multiple values for keyword argument '" + key + "'");
    out.keyword.emplace_back(key, std::move(value));
  };
  for (const NodePtr& arg : args) {
    if (arg->kind == NodeKind::kKeyword) add_keyword(arg->text, eval(*arg->a, env));
    if (arg->kind != NodeKind::kKeywordSpread) continue;
    const Value mapping = eval(*arg->a, env);
    if (!mapping.is_object())
      fail(std::string("Argument after ** must be a mapping, not ") + mapping.type_name());
    for (const auto& [key, value] : mapping.fields().entries()) add_keyword(key, value);
  }
  return out;
}

Value Evaluator::eval_call(const Node& node, Environment& env) {
  const CallArgs args = eval_args(node.items, env);
  const Value fn = eval(*node.a, env);
  if (!fn.is_function())
    fail(std::string("Cannot call something that is not a function: got ") + fn.type_name());
  return fn.function_value()(args, env);
}

Value Evaluator::eval_unary(const Node& node, Environment& env) {
  const Value operand = eval(*node.a, env);
  if (node.text == "not") return Value::boolean(!operand.truthy());
  if (!operand.is_number() && !operand.is_bool())
    fail("Unknown operator \"" + node.text + "\" for " + operand.type_name());
  const double value = (node.text == "-" ? -1 : 1) * numeric_value(operand);
  return operand.is_float() ? Value::floating(value) : Value::integer(value);
}

Value Evaluator::eval_binary(const Node& node, Environment& env) {
  const Value left = eval(*node.a, env);
  if (node.text == "and") return left.truthy() ? eval(*node.b, env) : left;
  if (node.text == "or") return left.truthy() ? left : eval(*node.b, env);
  const Value right = eval(*node.b, env);
  if (node.text == "==") return Value::boolean(loose_equals(left, right));
  if (node.text == "!=") return Value::boolean(!loose_equals(left, right));
  return binary_operation(node.text, left, right);
}

}  // namespace qs::chat
