// y = x W^T for a weight matrix of any supported type.
//
// Shapes: W [out, in] (TensorView of F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K, read in place),
// x [n_tokens, in] f32, y [n_tokens, out] f32. y[t, r] = sum_i x[t, i] * W[r, i] (+ bias[r]).
//
// Design: float weights are dotted with the f32 activations directly. For integer weights each
// activation row is quantized once per call into int8 blocks (Q8_0A for Q8_0/Q4_0, Q8_K for the
// K-quants, see kernels/cpu/dot_kernels.h) in the scratch buffer; the dots then run on int8 pairs.
// Threads split the output rows into contiguous ranges of kRowsPerTile-row tiles. Types with a
// tile kernel (DotKernels::tile_dot; AVX2 Q8_0 and Q4_K) get the whole tile x token chunk in one
// call: 4-row groups outer (4 rows' blocks, 4 x 34 B / 4 x 144 B per step, stay in L1), tokens in
// groups of 4 inner (4 activation rows, ~4.5 KB per 1024 inputs, stay in L1), 4 (row, token) pairs
// per float vector -- see dot_avx2.cc. Otherwise, inside a tile, tokens go in groups of
// kTokensPerTile so a group's activations (~8 x 1.1 x in bytes) stay in L1/L2 while the tile's
// rows (16 rows) stay in L2, and the row dot runs per row. Batches of at least
// GroupGemm::min_tokens tokens of a type with a repacking GEMM (Q4_K, Q6_K, Q8_0 on AVX2) go
// through it instead, GroupGemm::rows rows at a time (8 in gemm_r8_avx2.cc, 16 for Q8_0 at the
// AVX-512 VNNI level), each thread repacking into its own scratch; a GEMM that wants unsigned
// activations (GroupGemm::unsigned_activations) gets the chunk's quants sign-flipped once. Every weight byte is read from memory once per
// call (per max_tokens tokens when the batch exceeds the scratch). No allocation, no locks.
// Results are bit-identical whatever n_tokens, the token grouping or the thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "formats/tensor.h"
#include "core/thread_pool.h"

namespace qs::kernels {

inline constexpr int64_t kRowsPerTile = 16;
inline constexpr int kTokensPerTile = 8;
inline constexpr int64_t kDefaultScratchTokens = 64;

/// Buffers sized once: the quantized activations of up to `max_tokens` rows of
/// `max_in_features` (shared by all threads) and one repacked 8-row weight group per thread
/// (kMaxGroupGemmBytesPerBlock bytes per 256 inputs, ~214 KB per thread at 9728 inputs).
class MatmulScratch {
 public:
  MatmulScratch(int n_threads, int64_t max_in_features, int64_t max_tokens = kDefaultScratchTokens);
  int n_threads() const { return n_threads_; }
  int64_t max_in_features() const { return max_in_features_; }
  int64_t max_tokens() const { return max_tokens_; }
  uint8_t* activations() { return buffer_.data(); }
  /// 32-byte aligned repack buffer of thread `thread` (< n_threads()).
  uint8_t* repack_buffer(int thread);
  /// Per-token terms of the packed kernels (prepare_packed_activations): max_tokens() rows of
  /// packed_extra_stride() int32, in kPackedExtraSlices slices (one per weight type of a fused
  /// call: Q4_K and Q6_K share their Q8_K activations but not these terms).
  static constexpr int kPackedExtraSlices = 2;
  int32_t* packed_extra(int slice = 0) {
    return extra_.data() + extra_stride_ * static_cast<size_t>(max_tokens_) * static_cast<size_t>(slice);
  }
  size_t packed_extra_stride() const { return extra_stride_; }

 private:
  int n_threads_;
  int64_t max_in_features_;
  int64_t max_tokens_;
  size_t repack_bytes_;
  std::vector<uint8_t> buffer_;
  std::vector<uint8_t> repack_;
  size_t extra_stride_;
  std::vector<int32_t> extra_;
};

/// y = x W^T (+ bias when `bias` is not null: [out] f32), with the kernels of active_cpu_isa().
/// A W with layout kPackedRows16 goes through the table's packed kernels, 16-row groups split
/// over the threads, every token count (decode included) on the same kernel.
/// Throws qs::Error if W's type (or packed layout) is not supported by the table, W.cols() exceeds the scratch width, or W.cols()
/// is not a multiple of the type's block size.
void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* y,
            ThreadPool& pool, MatmulScratch& scratch, const float* bias = nullptr);

/// Same with an explicit kernel table (tests run every ISA level through this).
struct DotKernels;
void matmul_with(const DotKernels& kernels, const TensorView& weight, const float* x, int64_t n_tokens,
                 float* y, ThreadPool& pool, MatmulScratch& scratch, const float* bias = nullptr);

/// One product of a fused call: y [n_tokens, weight->rows()] f32 = x W^T (+ bias [rows] f32 when
/// not null).
struct MatmulOutput {
  const TensorView* weight = nullptr;
  float* y = nullptr;
  const float* bias = nullptr;
};

/// Every product of `outputs` with the same input x [n_tokens, in] f32 (Q, K and V; gate and up):
/// the same bits as one matmul_with() per output. When all weights are packed (kPackedRows16) with
/// the same width and activation format, x is quantized once and ONE parallel region runs the
/// 16-row groups of all of them, claimed from one counter: a decode step pays one fork-join and
/// one tail (the last run of groups, while the other threads wait) instead of one per projection.
/// Otherwise (or with more than 4 outputs) it is one matmul_with() per output. Throws what
/// matmul_with throws.
void matmul_outputs_with(const DotKernels& kernels, std::span<const MatmulOutput> outputs, const float* x,
                         int64_t n_tokens, ThreadPool& pool, MatmulScratch& scratch);
void matmul_outputs(std::span<const MatmulOutput> outputs, const float* x, int64_t n_tokens, ThreadPool& pool,
                    MatmulScratch& scratch);

}  // namespace qs::kernels
