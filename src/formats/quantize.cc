// quantize_row: dispatch on the destination type.
#include "formats/quantize.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace qs {

void quantize_row(DType dtype, const float* src, void* dst, int64_t n) {
  (void)row_bytes(dtype, n);  // throws when n is not a multiple of the block size
  auto* out = static_cast<uint8_t*>(dst);
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = fp32_to_bf16(src[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case DType::Q8_0: quantize_row_q8_0(src, dst, n); return;
    case DType::Q4_0: quantize_row_q4_0(src, dst, n); return;
    case DType::Q4_K: quantize_row_q4_k(src, dst, n); return;
    case DType::Q5_K: quantize_row_q5_k(src, dst, n); return;
    case DType::Q6_K: quantize_row_q6_k(src, dst, n); return;
  }
  throw Error("quantize_row: type " + std::string(dtype_name(dtype)) + " is not supported");
}

}  // namespace qs
