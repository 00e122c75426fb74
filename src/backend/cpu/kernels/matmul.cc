#include "backend/cpu/kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "core/error.h"
#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/packed_rows.h"

namespace qs::kernels {

namespace {
// Bytes per activation row in the widest format (Q8_K: 292 bytes per 256, >= Q8_0A's 36 per 32).
size_t max_activation_row_bytes(int64_t in) {
  return static_cast<size_t>((in + kBlockK - 1) / kBlockK) * sizeof(BlockQ8_K);
}

// qs[i] ^= 0x80 for every quant of n_blocks blocks: q in -127..127 becomes q + 128 read as uint8.
void flip_sign_bits(BlockQ8_0A* blocks, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int8_t& q : blocks[b].qs) q = static_cast<int8_t>(static_cast<uint8_t>(q) ^ 0x80u);
  }
}
}  // namespace

MatmulScratch::MatmulScratch(int n_threads, int64_t max_in_features, int64_t max_tokens)
    : n_threads_(std::max(1, n_threads)),
      max_in_features_(max_in_features),
      max_tokens_(std::max<int64_t>(1, max_tokens)),
      repack_bytes_(static_cast<size_t>((max_in_features + kBlockK - 1) / kBlockK) * kMaxGroupGemmBytesPerBlock),
      buffer_(max_activation_row_bytes(max_in_features) * static_cast<size_t>(max_tokens_)),
      repack_(repack_bytes_ * static_cast<size_t>(n_threads_) + 64),
      extra_stride_(static_cast<size_t>((max_in_features + kBlockK - 1) / kBlockK * kPackedExtraPer256)),
      extra_(extra_stride_ * static_cast<size_t>(max_tokens_)) {}

uint8_t* MatmulScratch::repack_buffer(int thread) {
  const auto base = reinterpret_cast<uintptr_t>(repack_.data());
  const uintptr_t aligned = (base + 63) & ~uintptr_t{63};
  return reinterpret_cast<uint8_t*>(aligned) + repack_bytes_ * static_cast<size_t>(thread);
}

void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch, const float* bias) {
  matmul_with(active_dot_kernels(), weight, x, n_tokens, y, pool, scratch, bias);
}

namespace {
// The packed path of matmul_with: activations quantized (and their packed terms prepared) once per
// chunk of max_tokens tokens, then the threads run contiguous runs of 16-row groups (claimed from a
// shared counter) over all tokens of the chunk (the kernel loops over sub-chunks of up to 12
// tokens, re-reading a group from L1/L2).
void matmul_packed(const DotKernels& kernels, const TensorView& weight, const float* x, int64_t n_tokens, float* y,
                   ThreadPool& pool, MatmulScratch& scratch, const float* bias) {
  const int64_t out = weight.rows();
  const int64_t in = weight.cols();
  const PackedGemmFn fn = kernels.packed_gemm(weight.dtype);
  if (fn == nullptr) {
    throw Error("matmul: weight '" + weight.name + "' is packed in 16-row groups, which the " +
                std::string(cpu_isa_name(kernels.isa)) + " kernels cannot read");
  }
  if (in > scratch.max_in_features()) {
    throw Error("matmul: weight '" + weight.name + "' is wider than the scratch buffers");
  }
  const size_t group_bytes = packed_group_bytes(weight.dtype, in);  // throws for partial blocks
  const ActivationFormat format = activation_format(weight.dtype);
  const size_t act_stride = activation_row_bytes(format, in);
  const size_t extra_stride = scratch.packed_extra_stride();
  const int64_t n_groups = (out + kPackedRows - 1) / kPackedRows;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += scratch.max_tokens()) {
    const int64_t nt = std::min(scratch.max_tokens(), n_tokens - t0);
    uint8_t* act = scratch.activations();
    int32_t* extra = scratch.packed_extra();
    pool.parallel_for(nt, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        const float* row = x + (t0 + t) * in;
        uint8_t* a = act + t * act_stride;
        if (format == ActivationFormat::kQ8_0A) {
          kernels.quantize_q8_0a(row, reinterpret_cast<BlockQ8_0A*>(a), in);
        } else {
          kernels.quantize_q8_k(row, reinterpret_cast<BlockQ8_K*>(a), in);
        }
        prepare_packed_activations(weight.dtype, a, in, extra + t * extra_stride);
      }
    });
    // Threads claim runs of groups from a shared counter (about kRunsPerThread runs each) instead of
    // one fixed range each: a thread slowed by a noisy neighbour or a cold start no longer leaves
    // the others spinning at the end of every matmul. A group's result does not depend on which
    // thread computes it.
    constexpr int64_t kRunsPerThread = 8;
    const int64_t run = std::max<int64_t>(1, n_groups / (static_cast<int64_t>(pool.n_threads()) * kRunsPerThread));
    std::atomic<int64_t> next_group{0};
    pool.parallel_for(pool.n_threads(), [&](int64_t, int64_t, int) {
      for (int64_t g_begin = next_group.fetch_add(run, std::memory_order_relaxed); g_begin < n_groups;
           g_begin = next_group.fetch_add(run, std::memory_order_relaxed)) {
        const int64_t g_end = std::min(n_groups, g_begin + run);
        for (int64_t g = g_begin; g < g_end; ++g) {
          const int64_t r0 = g * kPackedRows;
          const int n_rows = static_cast<int>(std::min<int64_t>(kPackedRows, out - r0));
          float* yt = y + t0 * out + r0;
          fn(in, weight.data + g * group_bytes, n_rows, act, act_stride, extra, extra_stride, static_cast<int>(nt), yt,
             static_cast<size_t>(out));
          if (bias != nullptr) {
            for (int64_t t = 0; t < nt; ++t) {
              for (int r = 0; r < n_rows; ++r) yt[t * out + r] += bias[r0 + r];
            }
          }
        }
      }
    });
  }
}
}  // namespace

void matmul_with(const DotKernels& kernels, const TensorView& weight, const float* x, int64_t n_tokens,
                 float* y, ThreadPool& pool, MatmulScratch& scratch, const float* bias) {
  if (weight.layout == TensorLayout::kPackedRows16) {
    matmul_packed(kernels, weight, x, n_tokens, y, pool, scratch, bias);
    return;
  }
  const int64_t out = weight.rows();
  const int64_t in = weight.cols();
  const ActivationFormat format = activation_format(weight.dtype);  // throws for unknown types
  const RowDotFn dot = kernels.row_dot(weight.dtype);
  const TileDotFn tile = kernels.tile_dot(weight.dtype);
  const GroupGemm gemm = kernels.group_gemm(weight.dtype);
  const bool gemm_fits = gemm.fn != nullptr && pool.n_threads() <= scratch.n_threads() &&
                         gemm.bytes_per_block <= kMaxGroupGemmBytesPerBlock && gemm.rows >= 1 &&
                         kRowsPerTile % gemm.rows == 0;
  const size_t weight_stride = row_bytes(weight.dtype, in);        // throws for partial blocks
  if (in > scratch.max_in_features()) {
    throw Error("matmul: weight '" + weight.name + "' is wider than the scratch buffers");
  }
  const bool float_act = format == ActivationFormat::kF32;
  const size_t act_stride = float_act ? in * sizeof(float) : activation_row_bytes(format, in);
  const int64_t chunk_tokens = float_act ? n_tokens : scratch.max_tokens();
  const int64_t n_tiles = (out + kRowsPerTile - 1) / kRowsPerTile;

  for (int64_t t0 = 0; t0 < n_tokens; t0 += chunk_tokens) {
    const int64_t nt = std::min(chunk_tokens, n_tokens - t0);
    const uint8_t* act = reinterpret_cast<const uint8_t*>(x + t0 * in);
    const bool use_gemm = gemm_fits && nt >= gemm.min_tokens;
    const bool flip_signs = use_gemm && gemm.unsigned_activations;  // only Q8_0A rows (see GroupGemm)
    if (!float_act) {
      uint8_t* buffer = scratch.activations();
      pool.parallel_for(nt, [&](int64_t begin, int64_t end, int) {
        for (int64_t t = begin; t < end; ++t) {
          const float* row = x + (t0 + t) * in;
          if (format == ActivationFormat::kQ8_0A) {
            auto* blocks = reinterpret_cast<BlockQ8_0A*>(buffer + t * act_stride);
            kernels.quantize_q8_0a(row, blocks, in);
            if (flip_signs) flip_sign_bits(blocks, in / kBlockQ8_0);
          } else {
            kernels.quantize_q8_k(row, reinterpret_cast<BlockQ8_K*>(buffer + t * act_stride), in);
          }
        }
      });
      act = buffer;
    }
    pool.parallel_for(n_tiles, [&](int64_t tile_begin, int64_t tile_end, int thread) {
      float dots[kTokensPerTile];
      const int64_t row_begin = tile_begin * kRowsPerTile;
      const int64_t row_end = std::min(out, tile_end * kRowsPerTile);
      if (use_gemm) {
        uint8_t* repacked = scratch.repack_buffer(thread);
        for (int64_t r0 = row_begin; r0 < row_end; r0 += gemm.rows) {
          const int n_rows = static_cast<int>(std::min<int64_t>(row_end - r0, gemm.rows));
          float* yt = y + t0 * out + r0;
          gemm.fn(in, weight.data + r0 * weight_stride, weight_stride, n_rows, act, act_stride,
                  static_cast<int>(nt), yt, static_cast<size_t>(out), repacked);
          if (bias != nullptr) {
            for (int64_t t = 0; t < nt; ++t) {
              for (int r = 0; r < n_rows; ++r) yt[t * out + r] += bias[r0 + r];
            }
          }
        }
        return;
      }
      if (tile != nullptr) {
        // The tile kernel orders its own loops (see TileDotFn); bias is added afterwards, one
        // rounding as in the row-dot path below.
        for (int64_t r0 = row_begin; r0 < row_end; r0 += kRowsPerTile) {
          const int n_rows = static_cast<int>(std::min(row_end, r0 + kRowsPerTile) - r0);
          float* yt = y + t0 * out + r0;
          tile(in, weight.data + r0 * weight_stride, weight_stride, n_rows, act, act_stride,
               static_cast<int>(nt), yt, static_cast<size_t>(out));
          if (bias != nullptr) {
            for (int64_t t = 0; t < nt; ++t) {
              for (int r = 0; r < n_rows; ++r) yt[t * out + r] += bias[r0 + r];
            }
          }
        }
        return;
      }
      for (int64_t r0 = row_begin; r0 < row_end; r0 += kRowsPerTile) {
        const int64_t r1 = std::min(row_end, r0 + kRowsPerTile);
        for (int64_t tt = 0; tt < nt; tt += kTokensPerTile) {
          const int n_act = static_cast<int>(std::min<int64_t>(kTokensPerTile, nt - tt));
          for (int64_t r = r0; r < r1; ++r) {
            dot(in, weight.data + r * weight_stride, act + tt * act_stride, act_stride, n_act, dots);
            float* yr = y + (t0 + tt) * out + r;
            if (bias != nullptr) {
              for (int j = 0; j < n_act; ++j) yr[j * out] = dots[j] + bias[r];
            } else {
              for (int j = 0; j < n_act; ++j) yr[j * out] = dots[j];
            }
          }
        }
      }
    });
  }
}

}  // namespace qs::kernels
