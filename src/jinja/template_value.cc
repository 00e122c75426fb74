#include "jinja/template_value.h"

#include <algorithm>
#include <cmath>

#include "jinja/template_error.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

// True for keys JavaScript treats as array indices (canonical integers below 2^32 - 1).
bool is_array_index(const std::string& key) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return false;
  if (!std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::stoull(key) < 4294967295ULL;
}

constexpr int kMaxJsonDepth = 1000;

template <typename Json>
Value convert_json(const Json& json, int depth = 0) {
  if (depth > kMaxJsonDepth) throw TemplateError("context data is nested too deeply");
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::null();
    case nlohmann::json::value_t::boolean: return Value::boolean(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: {
      const double number = json.template get<double>();
      return number == std::trunc(number) ? Value::integer(number) : Value::floating(number);
    }
    case nlohmann::json::value_t::string: return Value::string(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      Array items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(convert_json(item, depth + 1));
      return Value::array(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      // A JSON object's keys are distinct, so members are appended without a lookup each (which
      // made an object of N members cost O(N^2)).
      struct Indexed {
        unsigned long long index;
        const std::string* key;
        const Json* value;
        bool operator<(const Indexed& o) const { return index < o.index; }
      };
      std::vector<Indexed> indices;
      for (const auto& [key, value] : json.items()) {
        if (is_array_index(key)) indices.push_back({std::stoull(key), &key, &value});
      }
      std::sort(indices.begin(), indices.end());
      Object fields;
      for (const Indexed& m : indices) fields.append_new(*m.key, convert_json(*m.value, depth + 1));
      for (const auto& [key, value] : json.items()) {
        if (!is_array_index(key)) fields.append_new(key, convert_json(value, depth + 1));
      }
      return Value::object(std::move(fields));
    }
    default: throw TemplateError("cannot convert binary JSON data to a template value");
  }
}

// The JavaScript primitive category of a value's underlying data.
enum class Primitive { kUndefined, kNull, kBool, kNumber, kString, kReference };

Primitive primitive_of(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return Primitive::kUndefined;
    case ValueKind::kNull: return Primitive::kNull;
    case ValueKind::kBool: return Primitive::kBool;
    case ValueKind::kInt:
    case ValueKind::kFloat: return Primitive::kNumber;
    case ValueKind::kString: return Primitive::kString;
    default: return Primitive::kReference;
  }
}

bool same_primitive_equal(const Value& a, const Value& b, Primitive kind) {
  switch (kind) {
    case Primitive::kUndefined:
    case Primitive::kNull: return true;
    case Primitive::kBool: return a.bool_value() == b.bool_value();
    case Primitive::kNumber: return a.number() == b.number();
    case Primitive::kString: return a.str() == b.str();
    case Primitive::kReference: return a.identity() == b.identity();
  }
  return false;
}

}  // namespace

Value Value::null() {
  Value v;
  v.kind_ = ValueKind::kNull;
  return v;
}

Value Value::boolean(bool value) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.flag_ = value;
  return v;
}

Value Value::integer(double value) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.number_ = value;
  return v;
}

Value Value::floating(double value) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.number_ = value;
  return v;
}

Value Value::string(std::string value) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.string_ = std::move(value);
  return v;
}

Value Value::array(Array items, bool tuple) {
  Value v;
  v.kind_ = ValueKind::kArray;
  v.flag_ = tuple;
  v.array_ = std::make_shared<Array>(std::move(items));
  return v;
}

Value Value::object(Object fields, ValueKind kind) {
  Value v;
  v.kind_ = kind;
  v.object_ = std::make_shared<Object>(std::move(fields));
  return v;
}

Value Value::function(Function fn) {
  Value v;
  v.kind_ = ValueKind::kFunction;
  v.function_ = std::make_shared<Function>(std::move(fn));
  return v;
}

const void* Value::identity() const {
  if (array_) return array_.get();
  if (object_) return object_.get();
  return function_.get();
}

bool Value::truthy() const {
  switch (kind_) {
    case ValueKind::kUndefined:
    case ValueKind::kNull: return false;
    case ValueKind::kBool: return flag_;
    case ValueKind::kInt:
    case ValueKind::kFloat: return number_ != 0 && !std::isnan(number_);
    case ValueKind::kString: return !string_.empty();
    case ValueKind::kArray: return !array_->empty();
    case ValueKind::kObject: return object_->size() > 0;
    case ValueKind::kNamespace:
    case ValueKind::kFunction: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case ValueKind::kUndefined: return "UndefinedValue";
    case ValueKind::kNull: return "NullValue";
    case ValueKind::kBool: return "BooleanValue";
    case ValueKind::kInt: return "IntegerValue";
    case ValueKind::kFloat: return "FloatValue";
    case ValueKind::kString: return "StringValue";
    case ValueKind::kArray: return flag_ ? "TupleValue" : "ArrayValue";
    case ValueKind::kObject: return "ObjectValue";
    case ValueKind::kNamespace: return "NamespaceValue";
    case ValueKind::kFunction: return "FunctionValue";
  }
  return "Value";
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [name, value] : entries_) {
    if (name == key) return &value;
  }
  return nullptr;
}

void Object::set(const std::string& key, Value value) {
  for (auto& [name, existing] : entries_) {
    if (name == key) {
      existing = std::move(value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(value));
}

void Object::append_new(const std::string& key, Value value) { entries_.emplace_back(key, std::move(value)); }

const Value* CallArgs::keyword_arg(std::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

const Value* CallArgs::arg(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  return keyword_arg(name);
}

Value from_json(const nlohmann::ordered_json& json) { return convert_json(json); }
Value from_json(const nlohmann::json& json) { return convert_json(json); }

std::string print_string(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kUndefined: return "undefined";
    case ValueKind::kNull: return "null";
    case ValueKind::kBool: return value.bool_value() ? "true" : "false";
    case ValueKind::kInt: return text::format_js_number(value.number());
    case ValueKind::kFloat: return text::format_float(value.number());
    case ValueKind::kString: return value.str();
    case ValueKind::kArray:
    case ValueKind::kObject:
    case ValueKind::kNamespace: return to_json(value, JsonOptions{}, false);
    case ValueKind::kFunction: return "function";
  }
  return {};
}

std::string raw_string(const Value& value) {
  switch (value.kind()) {
    case ValueKind::kInt:
    case ValueKind::kFloat: return text::format_js_number(value.number());
    case ValueKind::kArray: {
      std::string out;
      for (size_t i = 0; i < value.items().size(); ++i) {
        if (i > 0) out += ',';
        out += print_string(value.items()[i]);
      }
      return out;
    }
    case ValueKind::kObject:
    case ValueKind::kNamespace: return "[object Map]";
    default: return print_string(value);
  }
}

bool loose_equals(const Value& a, const Value& b) {
  const Primitive pa = primitive_of(a);
  const Primitive pb = primitive_of(b);
  if (pa == pb) return same_primitive_equal(a, b, pa);
  const auto nullish = [](Primitive p) {
    return p == Primitive::kUndefined || p == Primitive::kNull;
  };
  if (nullish(pa) || nullish(pb)) return nullish(pa) && nullish(pb);
  if (pa == Primitive::kBool) return loose_equals(Value::integer(a.bool_value() ? 1 : 0), b);
  if (pb == Primitive::kBool) return loose_equals(a, Value::integer(b.bool_value() ? 1 : 0));
  if (pa == Primitive::kNumber && pb == Primitive::kString)
    return a.number() == text::js_string_to_number(b.str());
  if (pa == Primitive::kString && pb == Primitive::kNumber)
    return text::js_string_to_number(a.str()) == b.number();
  if (pa == Primitive::kReference) return loose_equals(Value::string(raw_string(a)), b);
  if (pb == Primitive::kReference) return loose_equals(a, Value::string(raw_string(b)));
  return false;
}

bool strict_equals(const Value& a, const Value& b) {
  const Primitive pa = primitive_of(a);
  return pa == primitive_of(b) && same_primitive_equal(a, b, pa);
}

bool same_value_zero(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number() && std::isnan(a.number()) && std::isnan(b.number()))
    return true;
  return strict_equals(a, b);
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  const auto fail = [&](const std::string& what) { throw TemplateError(what); };
  for (ValueKind special : {ValueKind::kNull, ValueKind::kUndefined}) {
    if (a.kind() == special && b.kind() == special) return 0;
    if (a.kind() == special || b.kind() == special)
      fail(std::string("Cannot compare ") + a.type_name() + " with " + b.type_name());
  }
  const auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(a) && numeric(b)) {
    const double x = a.is_bool() ? (a.bool_value() ? 1 : 0) : a.number();
    const double y = b.is_bool() ? (b.bool_value() ? 1 : 0) : b.number();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (std::string_view(a.type_name()) != b.type_name())
    fail(std::string("Cannot compare different types: ") + a.type_name() + " and " + b.type_name());
  if (!a.is_string()) fail(std::string("Cannot compare type: ") + a.type_name());
  const std::string x = case_sensitive ? a.str() : text::to_lower(a.str());
  const std::string y = case_sensitive ? b.str() : text::to_lower(b.str());
  return x < y ? -1 : (x > y ? 1 : 0);
}

}  // namespace qs::chat
