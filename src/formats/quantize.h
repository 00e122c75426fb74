// Reference (scalar) quantization and dequantization of one row, per GGUF / ggml block type.
//
// Every function takes a row of `n` elements; for block types `n` must be a multiple of the block
// size (32 for Q8_0 / Q4_0 / Q8_0A, 256 for Q4_K / Q5_K / Q6_K / Q8_K) and the row occupies
// n / block_size * block_bytes bytes (see quant/blocks.h and qs::row_bytes). The byte buffers need
// no alignment. Decoding formulas follow ggml's dequantize_row_* (GGUF spec).
//
// Quantizers use round-to-nearest on a scale chosen so that no element is clamped, so each decoded
// element is within half a quantization step of its input (up to f32 rounding):
//   Q8_0: |err| <= d / 2             Q4_0: |err| <= |d| / 2, except |err| <= |d| for inputs on the
//                                           side opposite the block's largest magnitude beyond 7.5|d|
//   Q4_K / Q5_K: |err| <= d * sc[j] / 2 (sub-block j of 32)
//   Q6_K: |err| <= d * scales[k] / 2 (sub-block k of 16)
// where d, sc are the decoded scales of the written block.
#pragma once

#include <cstdint>

#include "formats/dtype.h"
#include "formats/blocks.h"

namespace qs {

/// Quantizes src[0..n) (f32) into `dtype` and writes row_bytes(dtype, n) bytes to dst. Supports
/// F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K. Throws qs::Error for other types or when n is not
/// a multiple of the block size.
void quantize_row(DType dtype, const float* src, void* dst, int64_t n);

// Per-type reference implementations (no checks beyond the block-multiple precondition).
void quantize_row_q8_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_0(const float* src, void* dst, int64_t n);
void quantize_row_q4_k(const float* src, void* dst, int64_t n);
void quantize_row_q5_k(const float* src, void* dst, int64_t n);
void quantize_row_q6_k(const float* src, void* dst, int64_t n);

void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_k(const void* src, float* dst, int64_t n);
void dequantize_row_q5_k(const void* src, float* dst, int64_t n);
void dequantize_row_q6_k(const void* src, float* dst, int64_t n);

/// Activations for Q8_0 / Q4_0 dots: n / 32 BlockQ8_0A with d = max|x| / 127 (f32) and
/// qs = round(x * (127 / max|x|)) to nearest, ties to even (|x - d * qs| <= d / 2). A block of
/// zeros gets d = 0. The SIMD quantizers in kernels/cpu reproduce this bit for bit.
void quantize_row_q8_0a(const float* src, BlockQ8_0A* dst, int64_t n);
/// Activations for K-quant dots: n / 256 BlockQ8_K, same rounding as Q8_0A, plus per-16 sums.
void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n);

/// Smallest binary16 value >= v for v >= 0 (saturates at the largest finite half). Used for
/// super-block scales so that rounding the scale never shrinks the covered range.
uint16_t fp32_to_fp16_round_up(float v);

}  // namespace qs
