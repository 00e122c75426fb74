// Tests (`x is name`, selectattr/select test names). The reference's set plus float, in, ne and
// divisibleby from Jinja2.
#include <algorithm>
#include <cmath>

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

bool parity(const Value& operand, const char* name, bool odd) {
  if (!operand.is_int())
    throw TemplateError(std::string("cannot ") + name + " on " + operand.type_name());
  return (std::fmod(operand.number(), 2) != 0) == odd;
}

bool contains(const Value& container, const Value& item) {
  if (container.is_array()) {
    return std::any_of(container.items().begin(), container.items().end(),
                       [&](const Value& v) { return strict_equals(v, item); });
  }
  if (container.is_string() && item.is_string())
    return container.str().find(item.str()) != std::string::npos;
  if (container.is_object() && item.is_string())
    return container.fields().find(item.str()) != nullptr;
  throw TemplateError(std::string("test 'in' cannot look in ") + container.type_name());
}

}  // namespace

bool run_test(const std::string& name, const Value& operand, const CallArgs& args) {
  const Value other = args.positional.empty() ? Value() : args.positional[0];
  if (name == "defined") return !operand.is_undefined();
  if (name == "undefined") return operand.is_undefined();
  if (name == "none") return operand.is_null();
  if (name == "boolean") return operand.is_bool();
  if (name == "true") return operand.is_bool() && operand.bool_value();
  if (name == "false") return operand.is_bool() && !operand.bool_value();
  if (name == "string") return operand.is_string();
  if (name == "number") return operand.is_number();
  if (name == "integer") return operand.is_int();
  if (name == "float") return operand.is_float();
  if (name == "callable") return operand.is_function();
  if (name == "iterable") return operand.is_array() || operand.is_string();
  if (name == "mapping") return operand.is_object();
  if (name == "sequence") return operand.is_array() || operand.is_object() || operand.is_string();
  if (name == "odd") return parity(operand, "odd", true);
  if (name == "even") return parity(operand, "even", false);
  if (name == "lower") return operand.is_string() && operand.str() == text::to_lower(operand.str());
  if (name == "upper") return operand.is_string() && operand.str() == text::to_upper(operand.str());
  if (name == "eq" || name == "equalto" || name == "==") return strict_equals(operand, other);
  if (name == "ne" || name == "!=") return !strict_equals(operand, other);
  if (name == "in") return contains(other, operand);
  if (name == "divisibleby") {
    if (!operand.is_number() || !other.is_number() || other.number() == 0)
      throw TemplateError("divisibleby needs a number and a non-zero divisor");
    return std::fmod(operand.number(), other.number()) == 0;
  }
  throw TemplateError("Unknown test: " + name);
}

}  // namespace qs::chat
