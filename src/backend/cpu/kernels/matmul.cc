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
      extra_(extra_stride_ * static_cast<size_t>(max_tokens_) * kPackedExtraSlices) {}

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
// One weight of a packed pass (see run_packed).
struct PackedPart {
  const TensorView* weight = nullptr;
  float* y = nullptr;
  const float* bias = nullptr;
  PackedGemmFn fn = nullptr;
  size_t group_bytes = 0;
  int64_t n_groups = 0;
  int extra_slice = 0;  // which MatmulScratch::packed_extra slice holds its per-token terms
};

constexpr int kMaxPackedParts = 4;

// A packed pass over up to kMaxPackedParts weights that share the input x: their types, one
// extra slice per distinct type. Fails (returns false) when the weights cannot share one pass:
// too many, one not packed, widths or activation formats differ, or more distinct types than
// slices. A packed weight whose type the table has no packed kernel for throws.
struct PackedPlan {
  PackedPart parts[kMaxPackedParts];
  int n_parts = 0;
  DType slice_dtype[MatmulScratch::kPackedExtraSlices] = {};
  int n_slices = 0;
  ActivationFormat format = ActivationFormat::kQ8_K;
  int64_t in = 0;
};

bool plan_packed(const DotKernels& kernels, std::span<const MatmulOutput> outputs, const MatmulScratch& scratch,
                 PackedPlan& plan) {
  if (outputs.empty() || outputs.size() > kMaxPackedParts) return false;
  for (const MatmulOutput& o : outputs) {
    if (o.weight->layout != TensorLayout::kPackedRows16) return false;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorView& w = *outputs[i].weight;
    const PackedGemmFn fn = kernels.packed_gemm(w.dtype);
    if (fn == nullptr) {
      throw Error("matmul: weight '" + w.name + "' is packed in 16-row groups, which the " +
                  std::string(cpu_isa_name(kernels.isa)) + " kernels cannot read");
    }
    if (w.cols() > scratch.max_in_features()) {
      throw Error("matmul: weight '" + w.name + "' is wider than the scratch buffers");
    }
    const ActivationFormat format = activation_format(w.dtype);
    if (i == 0) {
      plan.format = format;
      plan.in = w.cols();
    } else if (format != plan.format || w.cols() != plan.in) {
      return false;
    }
    int slice = 0;
    while (slice < plan.n_slices && plan.slice_dtype[slice] != w.dtype) ++slice;
    if (slice == plan.n_slices) {
      if (plan.n_slices == MatmulScratch::kPackedExtraSlices) return false;
      plan.slice_dtype[plan.n_slices++] = w.dtype;
    }
    PackedPart& part = plan.parts[plan.n_parts++];
    part.weight = &w;
    part.y = outputs[i].y;
    part.bias = outputs[i].bias;
    part.fn = fn;
    part.group_bytes = packed_group_bytes(w.dtype, w.cols());  // throws for partial blocks
    part.n_groups = (w.rows() + kPackedRows - 1) / kPackedRows;
    part.extra_slice = slice;
  }
  return true;
}

// The packed path: activations quantized (and each type's packed terms prepared) once per chunk of
// max_tokens tokens, then the threads run contiguous runs of work items, claimed from a shared
// counter, over all tokens of the chunk (the kernel loops over sub-chunks of up to 12 tokens,
// re-reading a group from L1/L2). A work item is one 16-row group of one part, the parts' groups
// numbered one after another.
void run_packed(const DotKernels& kernels, const PackedPlan& plan, const float* x, int64_t n_tokens, ThreadPool& pool,
                MatmulScratch& scratch) {
  const int64_t in = plan.in;
  const size_t act_stride = activation_row_bytes(plan.format, in);
  const size_t extra_stride = scratch.packed_extra_stride();
  int64_t n_items = 0;
  for (int i = 0; i < plan.n_parts; ++i) n_items += plan.parts[i].n_groups;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += scratch.max_tokens()) {
    const int64_t nt = std::min(scratch.max_tokens(), n_tokens - t0);
    uint8_t* act = scratch.activations();
    pool.parallel_for(nt, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) {
        const float* row = x + (t0 + t) * in;
        uint8_t* a = act + t * act_stride;
        if (plan.format == ActivationFormat::kQ8_0A) {
          kernels.quantize_q8_0a(row, reinterpret_cast<BlockQ8_0A*>(a), in);
        } else {
          kernels.quantize_q8_k(row, reinterpret_cast<BlockQ8_K*>(a), in);
        }
        for (int s = 0; s < plan.n_slices; ++s) {
          prepare_packed_activations(plan.slice_dtype[s], a, in, scratch.packed_extra(s) + t * extra_stride);
        }
      }
    });
    const auto run_group = [&](const PackedPart& part, int64_t g) {
      const int64_t out = part.weight->rows();
      const int64_t r0 = g * kPackedRows;
      const int n_rows = static_cast<int>(std::min<int64_t>(kPackedRows, out - r0));
      float* yt = part.y + t0 * out + r0;
      part.fn(in, part.weight->data + g * part.group_bytes, n_rows, act, act_stride,
              scratch.packed_extra(part.extra_slice), extra_stride, static_cast<int>(nt), yt, static_cast<size_t>(out));
      if (part.bias != nullptr) {
        for (int64_t t = 0; t < nt; ++t) {
          for (int r = 0; r < n_rows; ++r) yt[t * out + r] += part.bias[r0 + r];
        }
      }
    };
    const auto run_item = [&](int64_t item) {
      int i = 0;
      while (item >= plan.parts[i].n_groups) item -= plan.parts[i++].n_groups;
      run_group(plan.parts[i], item);
    };
    // Guided self-scheduling: a thread claims a run of max(min_run, remaining / (2 x threads))
    // items from a shared counter, so runs shrink toward the end and the last one (the tail the
    // other threads wait for) is about min_run items, >= kMinRunBytes of weights (a run is also
    // a prefetch stream). A slow thread no longer holds the others at the end of every matmul,
    // and an item's result does not depend on which thread computes it.
    constexpr size_t kMinRunBytes = size_t{64} << 10;
    size_t smallest_group = plan.parts[0].group_bytes;
    for (int i = 1; i < plan.n_parts; ++i) smallest_group = std::min(smallest_group, plan.parts[i].group_bytes);
    const int64_t min_run = std::max<int64_t>(1, static_cast<int64_t>(kMinRunBytes / smallest_group));
    const int64_t divisor = 2 * static_cast<int64_t>(pool.n_threads());
    std::atomic<int64_t> next_item{0};
    pool.parallel_for(pool.n_threads(), [&](int64_t, int64_t, int) {
      int64_t begin = next_item.load(std::memory_order_relaxed);
      while (begin < n_items) {
        const int64_t end = std::min(n_items, begin + std::max(min_run, (n_items - begin) / divisor));
        if (!next_item.compare_exchange_weak(begin, end, std::memory_order_relaxed)) continue;
        for (int64_t item = begin; item < end; ++item) run_item(item);
        begin = next_item.load(std::memory_order_relaxed);
      }
    });
  }
}
}  // namespace

void matmul_outputs_with(const DotKernels& kernels, std::span<const MatmulOutput> outputs, const float* x,
                         int64_t n_tokens, ThreadPool& pool, MatmulScratch& scratch) {
  PackedPlan plan;
  if (plan_packed(kernels, outputs, scratch, plan)) {
    run_packed(kernels, plan, x, n_tokens, pool, scratch);
    return;
  }
  for (const MatmulOutput& o : outputs) matmul_with(kernels, *o.weight, x, n_tokens, o.y, pool, scratch, o.bias);
}

void matmul_outputs(std::span<const MatmulOutput> outputs, const float* x, int64_t n_tokens, ThreadPool& pool,
                    MatmulScratch& scratch) {
  matmul_outputs_with(active_dot_kernels(), outputs, x, n_tokens, pool, scratch);
}

void matmul_with(const DotKernels& kernels, const TensorView& weight, const float* x, int64_t n_tokens,
                 float* y, ThreadPool& pool, MatmulScratch& scratch, const float* bias) {
  if (weight.layout == TensorLayout::kPackedRows16) {
    const MatmulOutput output{&weight, y, bias};
    PackedPlan plan;
    plan_packed(kernels, {&output, 1}, scratch, plan);  // one packed weight always plans (or throws)
    run_packed(kernels, plan, x, n_tokens, pool, scratch);
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
