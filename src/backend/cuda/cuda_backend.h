// The CUDA backend's entry points for the factory. Plain C++ (no CUDA headers): the definitions
// live in cuda_backend_cuda.cc, compiled only when the build has CUDA (QS_HAVE_CUDA).
//
// The backend (cuda_backend_cuda.cc): weights as bf16 on the device (F32 / F16 / BF16 converted at
// load, quantized GGUF types dequantized on the host with a warning), fused QKV and gate|up
// matrices, GEMMs through cuBLASLt (gemm.h), the layer kernels, split-KV paged attention and
// device sampling of kernels.h, KV in f32 / f16 / bf16, CUDA graphs for decode steps per batch
// bucket unless enforce_eager. Not batch-invariant: GEMM algorithms and
// attention splits depend on the batch shape.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace qs {

struct CudaBackendOptions {
  int device = 0;                       // CUDA device ordinal
  double gpu_memory_utilization = 0.9;  // --gpu-memory-utilization: share of device memory this process may use
  bool enforce_eager = false;           // --enforce-eager: no CUDA graphs
};

/// Number of CUDA devices; 0 when the driver, the runtime or the query fails in any way.
int cuda_device_count();

/// One line naming device 0 ("NVIDIA H200, 139.8 GiB, sm_90, driver 13.0"), or why there is none.
std::string cuda_device_summary();

/// Builds the CUDA backend on options.device. Throws qs::Error when no device is present.
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);

}  // namespace qs
