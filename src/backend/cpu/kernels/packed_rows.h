// Weights repacked once at load into 16-row interleaved groups ("R16"), for the matmul kernels of
// the AVX-512 VNNI level (packed_rows_avx512_vnni.cc).
//
// Why: in the file's row-major layout one vector of weight bytes belongs to ONE row, so a kernel
// must reduce across lanes for every (row, token) pair, or repack per call (gemm_r8_*.cc: the
// repack of 2.3 GB per verify step of the 4B model costs as much as its multiply). Here, per
// 256-element super-block (Q4_K, Q6_K) or 32-element block (Q8_0), 16 consecutive rows are
// interleaved 4 elements at a time: lane r (4 bytes) of a 64-byte vector holds 4 consecutive
// elements of row r, so one vpdpbusd against a token's 4 activation bytes broadcast adds 64
// products into 16 per-row int32 sums, and the same weight vector serves every token of a batch.
// Decode (1 token), speculative verify steps (2-9 tokens) and prefill all use this one layout, so
// nothing is repacked per call and no second copy of the weights is kept. The same idea (rows
// interleaved at load, "run-time repacking") is ik_llama.cpp's `-rtr`; this is our own layout.
//
// Layouts per group of 16 rows (rows past the tensor's end repeat its last row), blocks in order:
//   Q4_K (PackedQ4K16, 2368 bytes per 256 elements; the file needs 2304):
//     qs[j][v] lane r byte i: low nibble = element 32j + 4v + i of row r, high nibble = element
//       32j + 16 + 4v + i (j: sub-block of 32, v < 4), so a sub-block is 4 vectors;
//     sc[j][r] = 6-bit scale of sub-block j of row r; m[k][r][i] = 6-bit min of sub-block 2k + i;
//     d[r], dmin[r] = the row's f16 super-block scales.
//   Q6_K (PackedQ6K16, 3360 bytes = the file's 16 x 210):
//     ql[k][p] lane r byte i: low nibble = low 4 bits of element 16k + 4p + i, high nibble = of
//       element 16k + 8 + 4p + i (k: sub-block of 16, p < 2);
//     qh[k] lane r byte i: bits 2v, 2v + 1 = top 2 bits of element 16k + 4v + i (v < 4);
//     sc[k][r] = int8 scale of sub-block k of row r; d[r] = f16 scale.
//   Q8_0 (PackedQ8016, 544 bytes = the file's 16 x 34):
//     qs[v][r * 4 + i] = (q of element 4v + i of row r) XOR 0x80, i.e. q + 128 as uint8, the
//       unsigned operand of vpdpbusd; d[r] = f16 scale.
//
// Exactness: the kernels form, per (row, token, block), the same exact int32 totals as the
// row-major kernels of dot_avx2.cc; for Q4_K and Q6_K also the same float sequence, so those packed
// matmuls are bit-identical to the row-major ones. Q8_0 sums a whole 32-element block before its
// one fma (the row-major kernels: two halves), so it differs from them by float rounding. Every
// packed matmul is independent of batching, bit for bit (tests/backend/cpu/packed_rows_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"

namespace qs::kernels {

inline constexpr int kPackedRows = 16;

struct PackedQ4K16 {
  uint8_t qs[8][4][64];
  uint8_t sc[8][16];
  uint8_t m[4][16][2];
  uint16_t d[16];
  uint16_t dmin[16];
};
static_assert(sizeof(PackedQ4K16) == 2368);

struct PackedQ6K16 {
  uint8_t ql[16][2][64];
  uint8_t qh[16][64];
  int8_t sc[16][16];
  uint16_t d[16];
};
static_assert(sizeof(PackedQ6K16) == 3360);

struct PackedQ8016 {
  uint8_t qs[8][64];
  uint16_t d[16];
};
static_assert(sizeof(PackedQ8016) == 544);

/// True for the types this layout exists for (Q4_K, Q6_K, Q8_0).
bool packable_dtype(DType dtype);
/// Bytes of one packed block of 16 rows (PackedQ4K16 per 256 elements, PackedQ8016 per 32, ...).
size_t packed_block_bytes(DType dtype);
/// Elements per packed block (256 or 32).
int64_t packed_block_elements(DType dtype);
/// Bytes of a packed [rows, cols] matrix: ceil(rows / 16) groups of cols / block elements blocks.
/// Throws qs::Error for other types or cols not a multiple of the block size.
size_t packed_matrix_bytes(DType dtype, int64_t rows, int64_t cols);
/// Bytes of one 16-row group of a packed matrix with `cols` columns.
size_t packed_group_bytes(DType dtype, int64_t cols);

/// Packs rows [16 g, 16 g + 16) for g in [group_begin, group_end) of the row-major matrix `src`
/// ([rows, cols] in the file layout of `dtype`) into `dst` (the whole packed matrix: group g
/// starts at g * packed_group_bytes). Plain C++ (no ISA requirement), deterministic.
void pack_rows16(DType dtype, const uint8_t* src, int64_t rows, int64_t cols, int64_t group_begin, int64_t group_end,
                 uint8_t* dst);

/// int32 terms per activation row that the packed kernels fold into their sums, 16 per 256
/// inputs: Q4_K: word k of super-block b packs the int16 pair (sum of a over sub-block 2k, over
/// 2k + 1); Q6_K: -32 * bsums[k]; Q8_0: word b = -128 * (sum of a over 32-element block b), 8 per
/// 256 inputs.
inline constexpr int64_t kPackedExtraPer256 = 16;
/// Writes the terms of one activation row (`act`: n inputs as BlockQ8_K for Q4_K / Q6_K, BlockQ8_0A
/// for Q8_0) to extra[0 .. n / 256 * 16).
void prepare_packed_activations(DType dtype, const void* act, int64_t n, int32_t* extra);

/// Whether the packed kernels issue their software prefetches in a ONE-token product (decode).
/// Calls of 2+ tokens (verify steps, prefill) always prefetch. Process-wide, default on (faster on
/// the Intel machine the prefetch distances were tuned on); the CPU backend sets it from a
/// measurement at load (backend/cpu/decode_prefetch.h). Changes speed only, never a result.
void set_packed_decode_prefetch(bool on);
bool packed_decode_prefetch();

/// Writes row r of a packed matrix back in the file layout (row_bytes(dtype, cols) bytes): the
/// exact inverse of pack_rows16, for tests and tools.
void unpack_row16(DType dtype, const uint8_t* packed, int64_t cols, int64_t r, uint8_t* out);

}  // namespace qs::kernels
