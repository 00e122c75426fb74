// Runtime values of the chat-template interpreter.
//
// A Value is one of undefined, none (null), bool, integer, float, string, array (or tuple),
// object (an insertion-ordered mapping), namespace (a mutable attribute bag) or function (builtin,
// bound method or macro). Numbers are IEEE doubles for both integer and float values, exactly as
// in @huggingface/jinja, so arithmetic, overflow and printing match the reference. Arrays,
// objects and functions have reference semantics (shared), which is what makes namespace
// assignment and `==` identity comparison behave as in the reference.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qs::chat {

class Environment;
class Object;
class Value;
struct CallArgs;

using Array = std::vector<Value>;
/// A callable: receives the evaluated arguments and the caller's environment.
using Function = std::function<Value(const CallArgs&, Environment&)>;

enum class ValueKind {
  kUndefined,
  kNull,
  kBool,
  kInt,
  kFloat,
  kString,
  kArray,
  kObject,
  kNamespace,
  kFunction
};

class Value {
 public:
  /// The undefined value.
  Value() = default;

  static Value null();
  static Value boolean(bool value);
  static Value integer(double value);
  static Value floating(double value);
  static Value string(std::string value);
  static Value array(Array items = {}, bool tuple = false);
  /// An object (kind kObject) or a namespace (kind kNamespace).
  static Value object(Object fields, ValueKind kind = ValueKind::kObject);
  static Value function(Function fn);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_null() const { return kind_ == ValueKind::kNull; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_array() const { return kind_ == ValueKind::kArray; }
  bool is_tuple() const { return is_array() && flag_; }
  bool is_object() const { return kind_ == ValueKind::kObject; }
  bool is_namespace() const { return kind_ == ValueKind::kNamespace; }
  /// Object or namespace: a value with named fields.
  bool has_fields() const { return is_object() || is_namespace(); }
  bool is_function() const { return kind_ == ValueKind::kFunction; }

  bool bool_value() const { return flag_; }
  double number() const { return number_; }
  const std::string& str() const { return string_; }
  Array& items() const { return *array_; }
  Object& fields() const { return *object_; }
  const Function& function_value() const { return *function_; }

  /// Address of the shared array/object/function (identity for `==`), else nullptr.
  const void* identity() const;
  /// Python/Jinja truthiness as the reference computes it (empty containers are false;
  /// namespaces and functions are always true).
  bool truthy() const;
  /// The reference's type name ("StringValue", "ArrayValue", ...), for error messages.
  const char* type_name() const;

 private:
  ValueKind kind_ = ValueKind::kUndefined;
  bool flag_ = false;  // bool value, or "is a tuple" for arrays
  double number_ = 0;
  std::string string_;
  std::shared_ptr<Array> array_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<Function> function_;
};

/// Insertion-ordered string-keyed mapping (JavaScript Map semantics: setting an existing key
/// keeps its position).
class Object {
 public:
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
  /// Appends `key`, which the caller knows is not present yet (not checked: set() scans the
  /// entries for it, append_new() does not, so filling from a JSON object stays linear).
  void append_new(const std::string& key, Value value);
  /// Drops every entry (the evaluator empties the namespaces a render assigned into, see
  /// Evaluator::render).
  void clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

/// Evaluated call arguments: positional values, then keyword arguments in call order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  /// The keyword argument `name`, or nullptr.
  const Value* keyword_arg(std::string_view name) const;
  /// positional[index] if given, else the keyword argument `name`, else nullptr.
  const Value* arg(size_t index, std::string_view name) const;
};

/// Converts JSON to a Value the way the reference converts JavaScript data: numbers with an
/// integral value become integers, object keys that are array indices ("0", "1", ...) come first
/// in ascending order (JavaScript property order), the rest keep their order.
Value from_json(const nlohmann::ordered_json& json);
Value from_json(const nlohmann::json& json);

/// How `{{ value }}` prints (the reference's toString): integers like JavaScript numbers, floats
/// with at least one decimal, booleans as true/false, arrays/objects as JSON with undefined
/// members printed as `undefined`. Null and undefined print as "null"/"undefined" here; the
/// output statement skips them.
std::string print_string(const Value& value);

/// The raw JavaScript string conversion used by `~`, string `+` and join: numbers without the
/// forced decimal, arrays as comma-joined print_string of their items, objects "[object Map]".
std::string raw_string(const Value& value);

struct JsonOptions {
  std::optional<int> indent;  // nullopt or 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
};

/// The tojson serialization of the reference. `undefined_as_null` false prints undefined as
/// `undefined` (used when printing containers). Throws TemplateError for functions.
std::string to_json(const Value& value, const JsonOptions& options, bool undefined_as_null = true);

/// JavaScript `==` on the underlying values (numbers/strings/booleans coerce, null == undefined,
/// containers compare by identity).
bool loose_equals(const Value& a, const Value& b);
/// JavaScript `===` on the underlying values (integer 1 === float 1.0).
bool strict_equals(const Value& a, const Value& b);
/// SameValueZero (like strict_equals, but NaN equals NaN): the `unique` filter's notion.
bool same_value_zero(const Value& a, const Value& b);

/// The reference's ordering for sort/dictsort: numbers and booleans numerically, strings
/// (case-insensitively unless `case_sensitive`), null/undefined only against themselves.
/// Returns <0, 0, >0; throws TemplateError for incomparable values.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

}  // namespace qs::chat
