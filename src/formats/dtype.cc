#include "formats/dtype.h"

#include <array>
#include <string>

#include "core/error.h"
#include "formats/dequantize_kernels.h"

namespace qs {
namespace {

constexpr std::array<DTypeInfo, 8> kDTypes = {{
    {DType::F32, "F32", 1, 4},
    {DType::F16, "F16", 1, 2},
    {DType::Q4_0, "Q4_0", 32, 18},
    {DType::Q8_0, "Q8_0", 32, 34},
    {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176},
    {DType::Q6_K, "Q6_K", 256, 210},
    {DType::BF16, "BF16", 1, 2},
}};

}  // namespace

std::optional<DTypeInfo> dtype_info_from_ggml_id(uint32_t ggml_type_id) {
  for (const auto& info : kDTypes) {
    if (static_cast<uint32_t>(info.dtype) == ggml_type_id) return info;
  }
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  throw Error("unknown dtype id " + std::to_string(static_cast<uint32_t>(dtype)));
}

std::string_view dtype_name(DType dtype) { return dtype_info(dtype).name; }

size_t row_bytes(DType dtype, int64_t n_elements) {
  const DTypeInfo& info = dtype_info(dtype);
  if (n_elements < 0 || n_elements % static_cast<int64_t>(info.block_size) != 0) {
    throw Error("row of " + std::to_string(n_elements) + " elements is not a multiple of the " +
                std::string(info.name) + " block size " + std::to_string(info.block_size));
  }
  return static_cast<size_t>(n_elements) / info.block_size * info.block_bytes;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mantissa <<= 1;
      } while ((mantissa & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mantissa & 0x3ffu) << 13;
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | mantissa << 13;
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    // value * 2^24 = mantissa * 2^(exponent - 126): round that to an integer, ties to even.
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24 in this range
    uint32_t result = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = ((abs >> 13) - (112u << 10));
  const uint32_t r = abs & 0x1fffu;
  if (r > 0x1000u || (r == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

uint16_t fp32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

void dequantize_row(DType dtype, const void* src, float* dst, int64_t n) {
  (void)row_bytes(dtype, n);  // throws when n is not a multiple of the block size
  if (!active_dequantize_kernels().row(dtype, src, dst, n)) {
    throw Error("dequantize_row: type " + std::string(dtype_name(dtype)) + " is not supported yet");
  }
}

}  // namespace qs
