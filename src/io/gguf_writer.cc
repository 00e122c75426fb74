// GGUF v3 writer (GGUF spec: ggml docs/gguf.md).
#include "io/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
#include "io/binary_cursor.h"
#include "io/format_util.h"

namespace qs {
namespace {

constexpr uint32_t kGgufVersion = 3;
constexpr const char* kAlignmentKey = "general.alignment";
constexpr size_t kMaxKeyBytes = 65535;      // spec limit on metadata keys
constexpr size_t kMaxTensorNameBytes = 64;  // spec limit on tensor names

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

[[noreturn]] void bad_value(const std::string& key, const std::string& problem) {
  throw Error("GgufWriter: metadata key '" + printable(key) + "': " + problem);
}

/// Range of the integer types, widened.
bool int_fits(GgufValueType type, const GgufValue& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.value)) {
    switch (type) {
      case GgufValueType::UINT8: return *u <= std::numeric_limits<uint8_t>::max();
      case GgufValueType::UINT16: return *u <= std::numeric_limits<uint16_t>::max();
      case GgufValueType::UINT32: return *u <= std::numeric_limits<uint32_t>::max();
      case GgufValueType::UINT64: return true;
      default: return false;
    }
  }
  const auto* s = std::get_if<int64_t>(&v.value);
  if (s == nullptr) return false;
  switch (type) {
    case GgufValueType::INT8: return *s >= INT8_MIN && *s <= INT8_MAX;
    case GgufValueType::INT16: return *s >= INT16_MIN && *s <= INT16_MAX;
    case GgufValueType::INT32: return *s >= INT32_MIN && *s <= INT32_MAX;
    case GgufValueType::INT64: return true;
    default: return false;
  }
}

/// Throws qs::Error unless `v` can be encoded as its declared type.
void check_value(const std::string& key, const GgufValue& v, int depth) {
  switch (v.type) {
    case GgufValueType::FLOAT32:
    case GgufValueType::FLOAT64:
      if (!std::holds_alternative<double>(v.value)) bad_value(key, "float not held as double");
      return;
    case GgufValueType::BOOL:
      if (!std::holds_alternative<bool>(v.value)) bad_value(key, "bool value not held as bool");
      return;
    case GgufValueType::STRING:
      if (!std::holds_alternative<std::string>(v.value)) bad_value(key, "string value not held");
      return;
    case GgufValueType::ARRAY: {
      const auto* a = std::get_if<std::shared_ptr<GgufArray>>(&v.value);
      if (a == nullptr || *a == nullptr) bad_value(key, "array value without an array");
      if (depth >= kGgufMaxArrayNesting) bad_value(key, "arrays nested too deep");
      for (const GgufValue& e : (*a)->values) {
        if (e.type != (*a)->element_type) {
          bad_value(key, "array of " + gguf_type_name((*a)->element_type) + " holds a " +
                             gguf_type_name(e.type));
        }
        check_value(key, e, depth + 1);
      }
      return;
    }
    default:
      if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(GgufValueType::FLOAT64)) {
        bad_value(key, "unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
      }
      if (!int_fits(v.type, v)) {
        bad_value(key, "integer value out of range for " + gguf_type_name(v.type));
      }
  }
}

void encode_value(std::string& out, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::UINT8: put(out, static_cast<uint8_t>(std::get<uint64_t>(v.value))); break;
    case GgufValueType::UINT16: put(out, static_cast<uint16_t>(std::get<uint64_t>(v.value))); break;
    case GgufValueType::UINT32: put(out, static_cast<uint32_t>(std::get<uint64_t>(v.value))); break;
    case GgufValueType::UINT64: put(out, std::get<uint64_t>(v.value)); break;
    case GgufValueType::INT8: put(out, static_cast<int8_t>(std::get<int64_t>(v.value))); break;
    case GgufValueType::INT16: put(out, static_cast<int16_t>(std::get<int64_t>(v.value))); break;
    case GgufValueType::INT32: put(out, static_cast<int32_t>(std::get<int64_t>(v.value))); break;
    case GgufValueType::INT64: put(out, std::get<int64_t>(v.value)); break;
    case GgufValueType::FLOAT32: put(out, static_cast<float>(std::get<double>(v.value))); break;
    case GgufValueType::FLOAT64: put(out, std::get<double>(v.value)); break;
    case GgufValueType::BOOL: put<uint8_t>(out, std::get<bool>(v.value) ? 1 : 0); break;
    case GgufValueType::STRING: put_string(out, std::get<std::string>(v.value)); break;
    case GgufValueType::ARRAY: {
      const GgufArray& a = *std::get<std::shared_ptr<GgufArray>>(v.value);
      put(out, static_cast<uint32_t>(a.element_type));
      put<uint64_t>(out, a.values.size());
      for (const GgufValue& e : a.values) encode_value(out, e);
      break;
    }
  }
}

template <typename T, typename Wide>
GgufValue make_array(GgufValueType element_type, const std::vector<T>& values) {
  auto array = std::make_shared<GgufArray>();
  array->element_type = element_type;
  array->values.reserve(values.size());
  for (const T& x : values) {
    GgufValue& element = array->values.emplace_back();
    element.type = element_type;
    element.value = Wide(x);
  }
  GgufValue result;
  result.type = GgufValueType::ARRAY;
  result.value = std::move(array);
  return result;
}

/// RAII FILE* that removes the unfinished temporary file unless released.
class TempFile {
 public:
  TempFile(std::string tmp_path, std::string final_path)
      : tmp_(std::move(tmp_path)), final_(std::move(final_path)) {
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (file_ == nullptr) fail("cannot create " + tmp_);
  }
  ~TempFile() {
    if (file_ != nullptr) std::fclose(file_);
    if (!done_) std::remove(tmp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const void* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, file_) != n) fail("write failed");
  }
  void pad(size_t n) {
    static const char kZeros[64] = {};
    for (; n > 0; n -= std::min(n, sizeof kZeros)) write(kZeros, std::min(n, sizeof kZeros));
  }
  void commit() {
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) fail("write failed on close");
    if (std::rename(tmp_.c_str(), final_.c_str()) != 0) fail("cannot rename " + tmp_ + " to it");
    done_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(final_ + ": " + what + ": " + std::strerror(errno));
  }
  std::string tmp_;
  std::string final_;
  std::FILE* file_ = nullptr;
  bool done_ = false;
};

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || alignment % 8 != 0 || (alignment & (alignment - 1)) != 0) {
    throw Error("GgufWriter: alignment " + std::to_string(alignment) +
                " must be a power of two and a multiple of 8");
  }
}

void GgufWriter::add_value(const std::string& key, const GgufValue& value) {
  if (key.size() > kMaxKeyBytes) bad_value(key, "key longer than 65535 bytes");
  check_value(key, value, 0);
  for (const auto& [k, v] : metadata_) {
    if (k == key) bad_value(key, "added twice");
  }
  if (key == kAlignmentKey &&
      (value.type != GgufValueType::UINT32 || std::get<uint64_t>(value.value) != alignment_)) {
    bad_value(key, "must be uint32 " + std::to_string(alignment_) +
                       " (set the alignment in the GgufWriter constructor)");
  }
  metadata_.emplace_back(key, value);
}

void GgufWriter::add_scalar(const std::string& key, GgufValueType type,
                            decltype(GgufValue::value) value) {
  add_value(key, GgufValue{type, std::move(value)});
}

void GgufWriter::add_uint8(const std::string& k, uint8_t v) {
  add_scalar(k, GgufValueType::UINT8, uint64_t{v});
}
void GgufWriter::add_int8(const std::string& k, int8_t v) {
  add_scalar(k, GgufValueType::INT8, int64_t{v});
}
void GgufWriter::add_uint16(const std::string& k, uint16_t v) {
  add_scalar(k, GgufValueType::UINT16, uint64_t{v});
}
void GgufWriter::add_int16(const std::string& k, int16_t v) {
  add_scalar(k, GgufValueType::INT16, int64_t{v});
}
void GgufWriter::add_uint32(const std::string& k, uint32_t v) {
  add_scalar(k, GgufValueType::UINT32, uint64_t{v});
}
void GgufWriter::add_int32(const std::string& k, int32_t v) {
  add_scalar(k, GgufValueType::INT32, int64_t{v});
}
void GgufWriter::add_uint64(const std::string& k, uint64_t v) {
  add_scalar(k, GgufValueType::UINT64, v);
}
void GgufWriter::add_int64(const std::string& k, int64_t v) {
  add_scalar(k, GgufValueType::INT64, v);
}
void GgufWriter::add_float32(const std::string& k, float v) {
  add_scalar(k, GgufValueType::FLOAT32, double{v});
}
void GgufWriter::add_float64(const std::string& k, double v) {
  add_scalar(k, GgufValueType::FLOAT64, v);
}
void GgufWriter::add_bool(const std::string& k, bool v) {
  add_scalar(k, GgufValueType::BOOL, v);
}
void GgufWriter::add_string(const std::string& k, const std::string& v) {
  add_scalar(k, GgufValueType::STRING, v);
}

void GgufWriter::add_string_array(const std::string& k, const std::vector<std::string>& v) {
  add_value(k, make_array<std::string, std::string>(GgufValueType::STRING, v));
}
void GgufWriter::add_int32_array(const std::string& k, const std::vector<int32_t>& v) {
  add_value(k, make_array<int32_t, int64_t>(GgufValueType::INT32, v));
}
void GgufWriter::add_int64_array(const std::string& k, const std::vector<int64_t>& v) {
  add_value(k, make_array<int64_t, int64_t>(GgufValueType::INT64, v));
}
void GgufWriter::add_uint32_array(const std::string& k, const std::vector<uint32_t>& v) {
  add_value(k, make_array<uint32_t, uint64_t>(GgufValueType::UINT32, v));
}
void GgufWriter::add_float32_array(const std::string& k, const std::vector<float>& v) {
  add_value(k, make_array<float, double>(GgufValueType::FLOAT32, v));
}
void GgufWriter::add_float64_array(const std::string& k, const std::vector<double>& v) {
  add_value(k, make_array<double, double>(GgufValueType::FLOAT64, v));
}

size_t GgufWriter::tensor_bytes(const std::string& name, DType dtype,
                                const std::vector<int64_t>& shape) {
  const std::string what = "GgufWriter: tensor '" + printable(name) + "'";
  if (name.size() > kMaxTensorNameBytes) {
    throw Error(what + " name is longer than " + std::to_string(kMaxTensorNameBytes) + " bytes");
  }
  if (shape.empty() || shape.size() > 4) {
    throw Error(what + " has " + std::to_string(shape.size()) + " dimensions, expected 1 to 4");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) throw Error(what + " has a dimension of " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n)) throw Error(what + " element count overflows");
  }
  const DTypeInfo& info = dtype_info(dtype);
  if (shape.back() % static_cast<int64_t>(info.block_size) != 0) {
    throw Error(what + " row length " + std::to_string(shape.back()) +
                " is not a multiple of the " + std::string(info.name) + " block size " +
                std::to_string(info.block_size));
  }
  return row_bytes(dtype, n);
}

void GgufWriter::add_pending(PendingTensor tensor) {
  for (const PendingTensor& t : tensors_) {
    if (t.name == tensor.name) {
      throw Error("GgufWriter: tensor '" + printable(tensor.name) + "' added twice");
    }
  }
  tensors_.push_back(std::move(tensor));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(data));
  add_tensor_view(name, dtype, std::move(shape), owned->data(), owned->size());
  tensors_.back().owned = std::move(owned);
}

void GgufWriter::add_tensor_view(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                 const void* data, size_t size_bytes) {
  const size_t expected = tensor_bytes(name, dtype, shape);
  if (data == nullptr) throw Error("GgufWriter: tensor '" + printable(name) + "' has no data");
  if (size_bytes != expected) {
    throw Error("GgufWriter: tensor '" + printable(name) + "' has " + std::to_string(size_bytes) +
                " bytes, expected " + std::to_string(expected) + " for its shape and type " +
                std::string(dtype_name(dtype)));
  }
  PendingTensor t{name, dtype, std::move(shape), expected, nullptr, nullptr, nullptr};
  t.borrowed = static_cast<const uint8_t*>(data);
  add_pending(std::move(t));
}

void GgufWriter::add_tensor_lazy(const std::string& name, DType dtype, std::vector<int64_t> shape,
                                 TensorFiller fill) {
  const size_t size = tensor_bytes(name, dtype, shape);
  add_pending(
      PendingTensor{name, dtype, std::move(shape), size, nullptr, nullptr, std::move(fill)});
}

std::string GgufWriter::encode_head() const {
  bool has_alignment_key = false;
  for (const auto& kv : metadata_) has_alignment_key |= kv.first == kAlignmentKey;
  const bool add_alignment_key = alignment_ != kGgufDefaultAlignment && !has_alignment_key;
  std::string out = "GGUF";
  put(out, kGgufVersion);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_.size() + (add_alignment_key ? 1 : 0));
  if (add_alignment_key) {
    put_string(out, kAlignmentKey);
    put(out, static_cast<uint32_t>(GgufValueType::UINT32));
    put(out, alignment_);
  }
  for (const auto& [key, value] : metadata_) {
    put_string(out, key);
    put(out, static_cast<uint32_t>(value.type));
    encode_value(out, value);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const PendingTensor& t : tensors_) {
    put_string(out, t.name);
    put(out, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put(out, static_cast<uint64_t>(*d));
    put(out, static_cast<uint32_t>(t.dtype));
    put(out, offset);
    offset = align_up(offset + t.size_bytes, alignment_);
  }
  out.append(align_up(out.size(), alignment_) - out.size(), '\0');
  return out;
}

void GgufWriter::write(const std::string& path) const {
  TempFile file(path + ".tmp", path);
  const std::string head = encode_head();
  file.write(head.data(), head.size());
  std::vector<uint8_t> buffer;
  for (const PendingTensor& t : tensors_) {
    const uint8_t* data = t.borrowed;
    if (data == nullptr) {
      buffer.assign(t.size_bytes, 0);
      if (t.fill) t.fill(buffer.data(), buffer.size());
      data = buffer.data();
    }
    file.write(data, t.size_bytes);
    file.pad(align_up(t.size_bytes, alignment_) - t.size_bytes);
  }
  file.commit();
}

}  // namespace qs
