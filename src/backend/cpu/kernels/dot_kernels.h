// Dot products of one weight row with activation rows, per weight type and ISA level.
//
// A weight row of `n` elements is stored in its file type (row_bytes(dtype, n) bytes). The
// activations it is dotted with depend on the type (activation_format):
//   F32, F16, BF16   -> f32 rows (any n)
//   Q8_0, Q4_0       -> BlockQ8_0A rows (n multiple of 32)
//   Q4_K, Q5_K, Q6_K -> BlockQ8_K rows (n multiple of 256)
// Integer dots accumulate exact int32 sums per (sub-)block and scale them in f32, as ggml does.
//
// Batch invariance: RowDotFn computes out[t] for n_act activation rows; every out[t] is
// bit-identical to what the same function returns for that row alone (n_act = 1), so results do
// not depend on how tokens are grouped. Different ISA levels may differ in the last bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/dtype.h"
#include "backend/cpu/kernels/cpu_isa.h"
#include "formats/blocks.h"

namespace qs::kernels {

enum class ActivationFormat { kF32, kQ8_0A, kQ8_K };

/// Which activation rows a weight type is dotted with. Throws qs::Error for unsupported types.
ActivationFormat activation_format(DType weight_dtype);
/// Bytes of one activation row of n elements in `format` (n must suit the format's block size).
size_t activation_row_bytes(ActivationFormat format, int64_t n);

/// out[t] = sum_i W[i] * A_t[i] for t < n_act, A_t at act + t * act_stride_bytes.
using RowDotFn = void (*)(int64_t n, const void* weight_row, const void* act, size_t act_stride_bytes,
                          int n_act, float* out);
/// Quantizes n f32 activations into blocks (n multiple of the block size), bit-identical across
/// ISA levels.
/// Register-blocked tile: y[t * y_stride + r] = sum_i W_r[i] * A_t[i] for r < n_rows, t < n_act,
/// W_r at w + r * w_stride, A_t at act + t * act_stride. Same per-element results as the RowDotFn of
/// the same table (so matmul may use either), bit-identical whatever n_rows / n_act.
using TileDotFn = void (*)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act,
                           size_t act_stride, int n_act, float* y, size_t y_stride);
/// Repack-and-multiply over one group of n_rows <= GroupGemm::rows weight rows (gemm_r8_*.cc): the
/// rows are interleaved into `scratch` (bytes_per_block bytes per 256 inputs, 64-byte aligned),
/// then y[t * y_stride + r] = sum_i W_r[i] * A_t[i] for every t < n_act. Bit-identical to the
/// RowDotFn / TileDotFn of the same table, so matmul picks whichever is faster.
using GroupGemmFn = void (*)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* act,
                             size_t act_stride, int n_act, float* y, size_t y_stride, uint8_t* scratch);
inline constexpr int kGroupRows = 8;
inline constexpr int kMaxGroupRows = 16;
/// The largest bytes_per_block of any GroupGemm (Q8_0 at the AVX-512 VNNI level: 16 rows x 8
/// blocks x 44 bytes; the AVX2 Q8_0 GEMM needs 8 x 608).
inline constexpr size_t kMaxGroupGemmBytesPerBlock = 5632;
struct GroupGemm {
  GroupGemmFn fn = nullptr;
  size_t bytes_per_block = 0;  // scratch bytes per 256 input features
  int min_tokens = 0;          // batches of at least this many tokens are faster through fn
  int rows = kGroupRows;       // weight rows per call (<= kMaxGroupRows, divides kRowsPerTile)
  /// fn reads Q8_0A activations whose int8 quants have their sign bit flipped (q + 128 as uint8,
  /// for vpdpbusd's unsigned operand); matmul flips them once per call before the first group.
  bool unsigned_activations = false;
};
/// Matmul over one 16-row group of a packed weight (packed_rows.h): y[t * y_stride + r] = sum_i
/// W_r[i] * A_t[i] for r < n_rows, t < n_act, `group` the group's packed blocks, A_t at act + t *
/// act_stride in the type's activation format and its prepared terms at extra + t * extra_stride
/// (prepare_packed_activations). Bit-identical to the RowDotFn of the same type.
using PackedGemmFn = void (*)(int64_t n, const uint8_t* group, int n_rows, const void* act, size_t act_stride,
                              const int32_t* extra, size_t extra_stride, int n_act, float* y, size_t y_stride);
using QuantizeQ8_0AFn = void (*)(const float* x, BlockQ8_0A* dst, int64_t n);
using QuantizeQ8_KFn = void (*)(const float* x, BlockQ8_K* dst, int64_t n);

struct DotKernels {
  CpuIsa isa;
  RowDotFn f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k;
  QuantizeQ8_0AFn quantize_q8_0a;
  QuantizeQ8_KFn quantize_q8_k;
  /// Optional tile kernels (nullptr: matmul calls the row dot per weight row).
  TileDotFn q8_0_tile = nullptr;
  TileDotFn q4_k_tile = nullptr;
  TileDotFn q6_k_tile = nullptr;
  /// Optional repacking GEMMs for batches (fn == nullptr: none).
  GroupGemm q4_k_gemm{};
  GroupGemm q6_k_gemm{};
  GroupGemm q8_0_gemm{};
  /// Optional kernels on 16-row packed weights (nullptr: this level does not pack that type).
  PackedGemmFn q4_k_packed = nullptr;
  PackedGemmFn q6_k_packed = nullptr;
  PackedGemmFn q8_0_packed = nullptr;

  /// The dot for `dtype`; throws qs::Error for unsupported types.
  RowDotFn row_dot(DType dtype) const;
  /// The tile kernel for `dtype`, or nullptr when this table has none.
  TileDotFn tile_dot(DType dtype) const {
    switch (dtype) {
      case DType::Q8_0: return q8_0_tile;
      case DType::Q4_K: return q4_k_tile;
      case DType::Q6_K: return q6_k_tile;
      default: return nullptr;
    }
  }
  /// The packed-weight kernel for `dtype`, or nullptr.
  PackedGemmFn packed_gemm(DType dtype) const {
    switch (dtype) {
      case DType::Q4_K: return q4_k_packed;
      case DType::Q6_K: return q6_k_packed;
      case DType::Q8_0: return q8_0_packed;
      default: return nullptr;
    }
  }
  /// The repacking GEMM for `dtype` (fn == nullptr when this table has none).
  GroupGemm group_gemm(DType dtype) const {
    switch (dtype) {
      case DType::Q4_K: return q4_k_gemm;
      case DType::Q6_K: return q6_k_gemm;
      case DType::Q8_0: return q8_0_gemm;
      default: return GroupGemm{};
    }
  }
};

/// Kernels of one ISA level, or nullptr when the CPU or the build lacks it.
const DotKernels* dot_kernels_for(CpuIsa isa);
/// Kernels of active_cpu_isa().
const DotKernels& active_dot_kernels();

// Per-level tables (defined in dot_scalar.cc / dot_avx2.cc). avx2_dot_kernels() returns nullptr
// when the build has no AVX2 path; it does not check the CPU.
const DotKernels& scalar_dot_kernels();
const DotKernels* avx2_dot_kernels();
// The same AVX2 table compiled with the AVX-512 VNNI level's flags (dot_avx2_evex_avx512_vnni.cc):
// identical instructions' semantics, so bit-identical results, but EVEX encodings and 32 vector
// registers; the base of avx512_vnni_dot_kernels(). nullptr when the build has no such path.
const DotKernels* avx2_dot_kernels_evex();
// Repacking GEMMs of the AVX2 level (gemm_r8_avx2.cc); empty when the build has no AVX2 path.
GroupGemm avx2_q4_k_group_gemm();
GroupGemm avx2_q6_k_group_gemm();
GroupGemm avx2_q8_0_group_gemm();
// The same GEMMs compiled with the AVX-512 VNNI level's flags (gemm_r8_evex_avx512_vnni.cc; the
// avx512_vnni table uses the Q4_K and Q6_K ones); empty when the build has no such path.
GroupGemm avx2_evex_q4_k_group_gemm();
GroupGemm avx2_evex_q6_k_group_gemm();
GroupGemm avx2_evex_q8_0_group_gemm();
// AVX-512 VNNI level (dot_avx512_vnni.cc): the AVX2 table with VNNI decode kernels for Q8_0, Q4_K
// and Q6_K, bit-identical to the AVX2 level; nullptr when the build has no such path.
const DotKernels* avx512_vnni_dot_kernels();
// Q8_0 repacking GEMM with vpdpbusd (gemm_r8_avx512_vnni.cc), bit-identical to the AVX2 one; empty
// when the build has no such path.
GroupGemm avx512_vnni_q8_0_group_gemm();
// Kernels on 16-row packed weights (packed_rows_avx512_vnni.cc) for Q4_K, Q6_K, Q8_0; nullptr for
// other types or when the build has no such path.
PackedGemmFn avx512_vnni_packed_gemm(DType dtype);
// AMX level (packed_rows_amx.cc): the avx512_vnni table whose packed Q4_K matmul runs chunks of 16
// tokens on AMX-INT8 tiles (fewer tokens on the VNNI kernel), bit-identical to it; nullptr when the
// build has no such path. amx_packed_gemm: that kernel for Q4_K, nullptr for other types.
const DotKernels* amx_dot_kernels();
PackedGemmFn amx_packed_gemm(DType dtype);

}  // namespace qs::kernels
