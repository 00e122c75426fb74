// A typed, non-owning view of one weight tensor's bytes (usually inside a memory-mapped file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace qs {

/// How the bytes of a weight matrix are arranged: the file's rows of blocks, or 16-row interleaved
/// groups made once at load by the CPU backend (backend/cpu/kernels/packed_rows.h), which only its
/// matmul reads.
enum class TensorLayout : uint8_t { kRowMajor, kPackedRows16 };

struct TensorView {
  std::string name;            // name as stored in the file ("blk.0.attn_q.weight" or HF name)
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // outermost first, PyTorch order: a linear weight is [out, in]
  const uint8_t* data = nullptr;
  size_t size_bytes = 0;
  TensorLayout layout = TensorLayout::kRowMajor;

  int64_t n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  /// Number of rows when viewed as a matrix [rows, shape.back()].
  int64_t rows() const { return shape.empty() ? 1 : n_elements() / shape.back(); }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
};

}  // namespace qs
