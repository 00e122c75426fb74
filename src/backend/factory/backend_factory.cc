#include "backend/factory/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels/cpu_isa.h"
#include "core/error.h"

namespace qs {

std::vector<std::string> registered_backends() { return {"cpu"}; }

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
  if (options.device == "cpu") {
    return std::make_unique<CpuBackend>(CpuBackendOptions{options.threads, options.pin_threads, options.worker_nice});
  }
  if (options.device == "cuda") {
    throw Error("qwenserve was built without CUDA support: --device cuda is not available (use --device cpu)");
  }
  throw Error("unknown device '" + options.device + "' (expected cpu or cuda)");
}

std::string backend_kernel_paths(const std::string& device) {
  if (device == "cpu") return "cpu kernels: " + std::string(kernels::cpu_isa_name(kernels::active_cpu_isa()));
  make_backend(BackendOptions{device});  // throws the device's error
  return device;
}

}  // namespace qs
