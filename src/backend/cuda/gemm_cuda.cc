#include "backend/cuda/gemm.h"

#include "backend/cuda/cuda_check.h"

namespace qs::cuda {

LtGemm::LtGemm(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  check(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc(gemm workspace)");
}

LtGemm::~LtGemm() {
  for (auto& [shape, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
  }
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

const LtGemm::Plan& LtGemm::plan_for(int64_t n, int64_t k, int64_t t, bool accumulate) {
  const auto key = std::make_tuple(n, k, t, accumulate);
  const auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  Plan p;
  check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b), "TRANSB");
  // A = W stored as column-major K x N (ld K); B = X as K x T (ld K); C = D as N x T (ld N).
  check(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k), "layout W");
  check(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, t, k), "layout X");
  check(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, n, t, n), "layout D");
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                             sizeof workspace_bytes_),
        "preference workspace");
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || returned == 0) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
    throw Error("cublasLt: no algorithm for a bf16 GEMM of N=" + std::to_string(n) + " K=" + std::to_string(k) +
                " T=" + std::to_string(t));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void LtGemm::run(const uint16_t* w, const uint16_t* x, float* d, int64_t n, int64_t k, int64_t t, bool accumulate,
                 cudaStream_t stream) {
  if (t < 1) return;
  const Plan& p = plan_for(n, k, t, accumulate);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check(cublasLtMatmul(handle_, p.desc, &alpha, w, p.a, x, p.b, &beta, d, p.c, d, p.c, &p.algo, workspace_,
                       workspace_bytes_, stream),
        "cublasLtMatmul");
}

}  // namespace qs::cuda
