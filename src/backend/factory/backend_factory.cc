#include "backend/factory/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels/cpu_isa.h"
#include "core/error.h"
#if defined(QS_HAVE_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace qs {

std::vector<std::string> registered_backends() {
  std::vector<std::string> names = {"cpu"};
#if defined(QS_HAVE_CUDA)
  if (cuda_device_count() > 0) names.push_back("cuda");
#endif
  return names;
}

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  if (options.device == "cpu") {
    return std::make_unique<CpuBackend>(CpuBackendOptions{options.threads, options.pin_threads, options.worker_nice});
  }
  if (options.device == "cuda") {
#if defined(QS_HAVE_CUDA)
    return make_cuda_backend(CudaBackendOptions{0, options.gpu_memory_utilization, options.enforce_eager});
#else
    throw Error("qwenserve was built without CUDA support: --device cuda is not available (use --device cpu)");
#endif
  }
  throw Error("unknown device '" + options.device + "' (expected cpu or cuda)");
}

std::string backend_kernel_paths(const std::string& device) {
  if (device == "cpu") return "cpu kernels: " + std::string(kernels::cpu_isa_name(kernels::active_cpu_isa()));
#if defined(QS_HAVE_CUDA)
  if (device == "cuda") {
    if (cuda_device_count() == 0) make_backend(BackendOptions{device});  // throws "no CUDA device found"
    return "cuda kernels: gemm=cublasLt-bf16 attention=split-kv-simple sampling=device (" + cuda_device_summary() + ")";
  }
#endif
  make_backend(BackendOptions{device});  // throws the device's error
  return device;
}

}  // namespace qs
