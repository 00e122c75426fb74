// GgufFile metadata lookups and typed getters (declared in gguf_reader.h).
#include <limits>

#include "core/error.h"
#include "io/binary_cursor.h"
#include "io/gguf_reader.h"

namespace qs {
namespace {

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: case GgufValueType::INT8:
    case GgufValueType::UINT16: case GgufValueType::INT16:
    case GgufValueType::UINT32: case GgufValueType::INT32:
    case GgufValueType::UINT64: case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool is_float_type(GgufValueType t) {
  return t == GgufValueType::FLOAT32 || t == GgufValueType::FLOAT64;
}

/// "array[string]" for arrays, gguf_type_name otherwise.
std::string value_type_name(const GgufValue& v) {
  const auto* array = std::get_if<std::shared_ptr<GgufArray>>(&v.value);
  if (v.type != GgufValueType::ARRAY || array == nullptr || *array == nullptr) {
    return gguf_type_name(v.type);
  }
  const GgufArray& a = **array;
  if (a.element_type == GgufValueType::ARRAY && !a.values.empty()) {
    return "array[" + value_type_name(a.values.front()) + "]";
  }
  return "array[" + gguf_type_name(a.element_type) + "]";
}

[[noreturn]] void wrong_type(const GgufFile& f, const std::string& key, const GgufValue& v,
                             const std::string& expected) {
  throw Error(f.path() + ": metadata key '" + printable(key) + "' has type " + value_type_name(v) +
              ", expected " + expected);
}

const GgufValue& required(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) throw Error(f.path() + ": metadata key '" + printable(key) + "' missing");
  return *v;
}

/// Integer value as int64, or nullopt if it is an unsigned value above INT64_MAX.
std::optional<int64_t> to_int64(const GgufValue& v) {
  if (const auto* s = std::get_if<int64_t>(&v.value)) return *s;
  const uint64_t u = std::get<uint64_t>(v.value);
  if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(u);
}

int64_t int_or_throw(const GgufFile& f, const std::string& key, const GgufValue& v,
                     const std::string& expected) {
  if (!is_integer_type(v.type)) wrong_type(f, key, v, expected);
  const std::optional<int64_t> i = to_int64(v);
  if (!i) {
    throw Error(f.path() + ": metadata key '" + printable(key) + "' value " +
                std::to_string(std::get<uint64_t>(v.value)) + " does not fit in int64");
  }
  return *i;
}

double float_or_throw(const GgufFile& f, const std::string& key, const GgufValue& v,
                      const std::string& expected) {
  if (is_float_type(v.type)) return std::get<double>(v.value);
  if (!is_integer_type(v.type)) wrong_type(f, key, v, expected);
  if (const auto* s = std::get_if<int64_t>(&v.value)) return static_cast<double>(*s);
  return static_cast<double>(std::get<uint64_t>(v.value));
}

const GgufArray& array_or_throw(const GgufFile& f, const std::string& key, const GgufValue& v,
                                const std::string& expected) {
  const auto* array = std::get_if<std::shared_ptr<GgufArray>>(&v.value);
  if (v.type != GgufValueType::ARRAY || array == nullptr || *array == nullptr) {
    wrong_type(f, key, v, expected);
  }
  return **array;
}

}  // namespace

std::string gguf_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8: return "uint8";
    case GgufValueType::INT8: return "int8";
    case GgufValueType::UINT16: return "uint16";
    case GgufValueType::INT16: return "int16";
    case GgufValueType::UINT32: return "uint32";
    case GgufValueType::INT32: return "int32";
    case GgufValueType::FLOAT32: return "float32";
    case GgufValueType::BOOL: return "bool";
    case GgufValueType::STRING: return "string";
    case GgufValueType::ARRAY: return "array";
    case GgufValueType::UINT64: return "uint64";
    case GgufValueType::INT64: return "int64";
    case GgufValueType::FLOAT64: return "float64";
  }
  return "type " + std::to_string(static_cast<uint32_t>(type));
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  if (v.type != GgufValueType::STRING) wrong_type(*this, key, v, "string");
  return std::get<std::string>(v.value);
}

uint64_t GgufFile::get_uint(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  if (!is_integer_type(v.type)) wrong_type(*this, key, v, "an unsigned integer");
  if (const auto* s = std::get_if<int64_t>(&v.value)) {
    if (*s < 0) {
      throw Error(path() + ": metadata key '" + printable(key) + "' value " + std::to_string(*s) +
                  " is negative, expected an unsigned integer");
    }
    return static_cast<uint64_t>(*s);
  }
  return std::get<uint64_t>(v.value);
}

int64_t GgufFile::get_int(const std::string& key) const {
  return int_or_throw(*this, key, required(*this, key), "an integer");
}

double GgufFile::get_float(const std::string& key) const {
  return float_or_throw(*this, key, required(*this, key), "a float");
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  if (v.type != GgufValueType::BOOL) wrong_type(*this, key, v, "bool");
  return std::get<bool>(v.value);
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  const GgufArray& a = array_or_throw(*this, key, v, "array[string]");
  if (a.element_type != GgufValueType::STRING) wrong_type(*this, key, v, "array[string]");
  std::vector<std::string> out;
  out.reserve(a.values.size());
  for (const GgufValue& e : a.values) out.push_back(std::get<std::string>(e.value));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  const GgufArray& a = array_or_throw(*this, key, v, "array[integer]");
  if (!is_integer_type(a.element_type)) wrong_type(*this, key, v, "array[integer]");
  std::vector<int64_t> out;
  out.reserve(a.values.size());
  for (const GgufValue& e : a.values) out.push_back(int_or_throw(*this, key, e, "array[integer]"));
  return out;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = required(*this, key);
  const GgufArray& a = array_or_throw(*this, key, v, "array[float]");
  if (!is_float_type(a.element_type) && !is_integer_type(a.element_type)) {
    wrong_type(*this, key, v, "array[float]");
  }
  std::vector<double> out;
  out.reserve(a.values.size());
  for (const GgufValue& e : a.values) out.push_back(float_or_throw(*this, key, e, "array[float]"));
  return out;
}

std::optional<std::string> GgufFile::get_string_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

std::optional<uint64_t> GgufFile::get_uint_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_uint(key);
}

std::optional<double> GgufFile::get_float_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}

std::optional<bool> GgufFile::get_bool_opt(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

}  // namespace qs
