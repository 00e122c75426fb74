// Element types of weight tensors and their storage layout.
//
// Numeric ids equal ggml's `enum ggml_type` (GGUF spec, "tensor types"), so a GGUF tensor's type
// field maps directly. Block-quantized types store `block_size` elements in `block_bytes` bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "formats/blocks.h"

namespace qs {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // GGUF/ggml spelling: "F32", "Q8_0", ...
  size_t block_size;      // elements per block (1 for plain floats)
  size_t block_bytes;     // bytes per block
};

/// Layout of a supported type. Returns std::nullopt for a ggml type id qwenserve does not know.
std::optional<DTypeInfo> dtype_info_from_ggml_id(uint32_t ggml_type_id);
const DTypeInfo& dtype_info(DType dtype);
std::string_view dtype_name(DType dtype);

/// Bytes of one row of `n_elements` elements. Throws qs::Error if n_elements is not a multiple of
/// the block size.
size_t row_bytes(DType dtype, int64_t n_elements);

// IEEE 754 binary16 <-> binary32 (round-to-nearest-even on the way down).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

// bfloat16 is the upper 16 bits of a binary32 (round-to-nearest-even on the way down, NaN kept).
inline float bf16_to_fp32(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint16_t fp32_to_bf16(float f);

/// Converts `n` elements of a row stored as `dtype` to f32 (block layouts and formulas in
/// formats/blocks.h), with the path of active_cpu_isa() (formats/dequantize_kernels.h). Supports F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K. Throws
/// qs::Error for other types or when n is not a multiple of the block size. The inverse,
/// quantize_row, is in quant/quantize.h.
void dequantize_row(DType dtype, const void* src, float* dst, int64_t n);

}  // namespace qs
