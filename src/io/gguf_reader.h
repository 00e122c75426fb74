// GGUF v3 reader over a memory-mapped file.
//
// Format (GGUF spec, ggml docs/gguf.md): magic "GGUF", u32 version (3; 2 accepted), u64 tensor
// count, u64 metadata kv count, then metadata (key string, u32 value type, value), tensor infos
// (name, u32 n_dims, u64 dims[n_dims] innermost first, u32 ggml type, u64 offset), padding to
// `general.alignment` (default 32), then tensor data. Strings are u64 length + bytes, little endian.
//
// Every size and offset is bounds-checked; malformed input throws qs::Error with a one-line message
// that starts with the file path, e.g. "m.gguf: tensor 'output.weight' data [off, end) past end of
// file (size N)".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/mapped_file.h"
#include "formats/tensor.h"

namespace qs {

enum class GgufValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

struct GgufValue;
struct GgufArray {
  GgufValueType element_type = GgufValueType::UINT8;
  std::vector<GgufValue> values;
};

/// One metadata value. Integers of every width are stored widened (int64/uint64), floats as double.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> value;
};

class GgufFile {
 public:
  /// Opens and fully validates `path`. Throws qs::Error (message starts with the path).
  static GgufFile open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  size_t file_size_bytes() const { return file_->size_bytes(); }
  uint64_t alignment() const { return alignment_; }

  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return metadata_.count(key) != 0; }
  const GgufValue* find(const std::string& key) const;

  // Typed getters. Each throws qs::Error "<path>: metadata key '<key>' missing" or "... has type X,
  // expected Y" (any integer type converts to the requested integer if it fits).
  std::string get_string(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;  // accepts float32/float64 and integers
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;

  std::optional<std::string> get_string_opt(const std::string& key) const;
  std::optional<uint64_t> get_uint_opt(const std::string& key) const;
  std::optional<double> get_float_opt(const std::string& key) const;
  std::optional<bool> get_bool_opt(const std::string& key) const;

  /// Tensors in file order. TensorView::shape is outermost first (GGUF dims reversed), data points
  /// into the mapping and has been checked to lie inside the file.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  /// Tensor by name, or nullptr.
  const TensorView* find_tensor(const std::string& name) const;

 private:
  GgufFile() = default;
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

/// Human-readable name of a value type ("uint32", "string", "array[string]" ...).
std::string gguf_type_name(GgufValueType type);

}  // namespace qs
