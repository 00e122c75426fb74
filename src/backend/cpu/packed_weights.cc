#include "backend/cpu/packed_weights.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/kernels/packed_rows.h"
#include "core/error.h"

namespace qs {

namespace {
constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

bool packable(const TensorView* t, const kernels::DotKernels& kernels) {
  return t != nullptr && t->layout == TensorLayout::kRowMajor && t->shape.size() == 2 &&
         kernels::packable_dtype(t->dtype) && kernels.packed_gemm(t->dtype) != nullptr &&
         t->cols() % kernels::packed_block_elements(t->dtype) == 0;
}

// The matrices matmul reads, in model order (lm_head may be the embedding table: it is packed as
// a copy, the embedding lookup keeps reading the original).
std::vector<const TensorView**> matrices(ModelWeights& w) {
  std::vector<const TensorView**> out;
  for (LayerWeights& l : w.layers) {
    for (const TensorView** t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj}) {
      out.push_back(t);
    }
  }
  out.push_back(&w.lm_head);
  return out;
}
}  // namespace

bool PackedModelWeights::enabled_by_environment() {
  static const bool enabled = [] {
    const char* env = std::getenv("QS_CPU_REPACK");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return enabled;
}

PackedModelWeights::PackedModelWeights(const ModelWeights& weights, const kernels::DotKernels& kernels,
                                       ThreadPool& pool, bool enabled)
    : weights_(weights) {
  if (!enabled) return;
  std::vector<const TensorView**> list = matrices(weights_);
  size_t total = 0;
  for (const TensorView** t : list) {
    if (packable(*t, kernels)) total += round_up(kernels::packed_matrix_bytes((*t)->dtype, (*t)->rows(), (*t)->cols()), kAlign);
  }
  if (total == 0) return;
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw Error("cpu backend: cannot allocate " + std::to_string(total) + " bytes for the packed weights (" +
                std::strerror(errno) + "); QS_CPU_REPACK=0 runs on the file's layout instead");
  }
  ::madvise(p, total, MADV_HUGEPAGE);  // advice only (see mapped_file.cc)
  arena_ = static_cast<uint8_t*>(p);
  arena_bytes_ = total;
  for (const TensorView** t : list) {
    if (packable(*t, kernels)) *t = pack(*t, pool);
  }
}

PackedModelWeights::~PackedModelWeights() {
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
}

const TensorView* PackedModelWeights::pack(const TensorView* t, ThreadPool& pool) {
  const size_t bytes = kernels::packed_matrix_bytes(t->dtype, t->rows(), t->cols());
  uint8_t* dst = arena_ + used_bytes_;
  used_bytes_ += round_up(bytes, kAlign);
  const int64_t groups = (t->rows() + kernels::kPackedRows - 1) / kernels::kPackedRows;
  pool.parallel_for(groups, [&](int64_t begin, int64_t end, int) {
    kernels::pack_rows16(t->dtype, t->data, t->rows(), t->cols(), begin, end, dst);
  });
  TensorView& v = views_.emplace_back(*t);
  v.data = dst;
  v.size_bytes = bytes;
  v.layout = TensorLayout::kPackedRows16;
  ++packed_tensors_;
  packed_bytes_ += bytes;
  return &v;
}

}  // namespace qs
