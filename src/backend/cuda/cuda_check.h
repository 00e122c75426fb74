// Error checks of the CUDA backend's host code: a failed CUDA runtime or cuBLASLt call becomes a
// qs::Error naming the call and CUDA's message. Only src/backend/cuda/ includes this header.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string>

#include "core/error.h"

namespace qs::cuda {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

inline void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("cublasLt: ") + what + ": " + cublasLtGetStatusName(status) + " (" +
                cublasLtGetStatusString(status) + ")");
  }
}

/// Throws for an error left by the kernel launches since the last check.
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

}  // namespace qs::cuda
