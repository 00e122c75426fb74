// GEMMs of the CUDA backend through cuBLASLt: D[T, N] (f32) = X[T, K] (bf16) . W[N, K]^T (bf16)
// (+ D when accumulating, which fuses the residual add of o_proj and down_proj), f32 accumulation
// (CUBLAS_COMPUTE_32F). Row-major W[N, K] is the column-major K x N matrix, so cuBLASLt computes
// D^T = op_T(W) . X^T with m = N, n = T, k = K.
// The algorithm of each (N, K, T, accumulate) shape is chosen once by cuBLASLt's heuristic (first
// result) and cached with its descriptors; every call uses the same explicit workspace, so no
// allocation happens inside a step (a requirement of CUDA graph capture).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

namespace qs::cuda {

class LtGemm {
 public:
  /// Creates the cuBLASLt handle and allocates `workspace_bytes` of device workspace. Throws qs::Error.
  explicit LtGemm(size_t workspace_bytes = size_t{32} << 20);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  /// Enqueues D = X W^T (+ D) on `stream`. w bf16 [n, k], x bf16 [t, k], d f32 [t, n], all
  /// device pointers, row-major. Throws qs::Error when cuBLASLt has no algorithm for the shape.
  void run(const uint16_t* w, const uint16_t* x, float* d, int64_t n, int64_t k, int64_t t, bool accumulate,
           cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan_for(int64_t n, int64_t k, int64_t t, bool accumulate);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Plan> plans_;
};

}  // namespace qs::cuda
