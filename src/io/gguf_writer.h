// GGUF v3 writer (GGUF spec: ggml docs/gguf.md): metadata of every value type, tensors of any
// qs::DType, data section and every tensor padded to the alignment. Used by `qwenserve quantize`
// and by tests. Files read back with qs::GgufFile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/dtype.h"
#include "io/gguf_reader.h"

namespace qs {

class GgufWriter {
 public:
  /// Fills `size_bytes` bytes at `dst` with a tensor's data; called once, during write().
  using TensorFiller = std::function<void(uint8_t* dst, size_t size_bytes)>;

  /// `alignment` in bytes: a power of two and a multiple of 8 (spec); if not 32 (the default)
  /// the writer stores it as `general.alignment` (uint32). Throws qs::Error otherwise.
  explicit GgufWriter(uint32_t alignment = 32);

  uint32_t alignment() const { return alignment_; }

  // Scalar metadata. Keys (at most 65535 bytes) are written in the order added; a repeated key
  // throws qs::Error.
  void add_uint8(const std::string& key, uint8_t value);
  void add_int8(const std::string& key, int8_t value);
  void add_uint16(const std::string& key, uint16_t value);
  void add_int16(const std::string& key, int16_t value);
  void add_uint32(const std::string& key, uint32_t value);
  void add_int32(const std::string& key, int32_t value);
  void add_uint64(const std::string& key, uint64_t value);
  void add_int64(const std::string& key, int64_t value);
  void add_float32(const std::string& key, float value);
  void add_float64(const std::string& key, double value);
  void add_bool(const std::string& key, bool value);
  void add_string(const std::string& key, const std::string& value);

  // Array metadata (element type as named).
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  void add_int32_array(const std::string& key, const std::vector<int32_t>& values);
  void add_int64_array(const std::string& key, const std::vector<int64_t>& values);
  void add_uint32_array(const std::string& key, const std::vector<uint32_t>& values);
  void add_float32_array(const std::string& key, const std::vector<float>& values);
  void add_float64_array(const std::string& key, const std::vector<double>& values);

  /// Any value as GgufFile reads it (e.g. copied from another file), including nested arrays.
  /// Throws qs::Error if `value` is inconsistent: variant alternative not matching `type`, an
  /// integer out of range for its width, array elements of another type, a null array.
  void add_value(const std::string& key, const GgufValue& value);

  /// Adds a tensor with a copy of its bytes. `name` is at most 64 bytes (spec); `shape` is
  /// outermost first (1 to 4 positive dims, innermost a multiple of the dtype's block size);
  /// `data.size()` must equal the size computed by qs::row_bytes. Throws qs::Error naming the
  /// tensor otherwise, or if the name repeats.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  std::vector<uint8_t> data);
  /// Like add_tensor, but borrows `data`: it must stay valid until write() returns.
  void add_tensor_view(const std::string& name, DType dtype, std::vector<int64_t> shape,
                       const void* data, size_t size_bytes);
  /// Like add_tensor, but the bytes are produced by `fill` during write(), one tensor at a time
  /// (keeps peak memory at one tensor when quantizing).
  void add_tensor_lazy(const std::string& name, DType dtype, std::vector<int64_t> shape,
                       TensorFiller fill);

  /// Expected byte size of a tensor of `dtype` and `shape` (outermost first). Throws qs::Error if
  /// the shape is invalid for GGUF.
  static size_t tensor_bytes(const std::string& name, DType dtype,
                             const std::vector<int64_t>& shape);

  /// Writes the whole file to `path` (via `path`.tmp, renamed when complete). Throws qs::Error
  /// "<path>: ..." on any I/O failure; the temporary file is removed then.
  void write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    size_t size_bytes = 0;
    std::shared_ptr<const std::vector<uint8_t>> owned;
    const uint8_t* borrowed = nullptr;
    TensorFiller fill;
  };

  void add_scalar(const std::string& key, GgufValueType type, decltype(GgufValue::value) value);
  void add_pending(PendingTensor tensor);
  std::string encode_head() const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace qs
