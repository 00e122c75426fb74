// Chooses and builds the backend named by --device. The only file of the engine, server and CLI
// side that knows the concrete backends.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace qs {

struct BackendOptions {
  std::string device = "cpu";  // --device cpu|cuda
  int threads = 1;             // CPU compute threads (host threads for a GPU backend)
  bool pin_threads = true;     // CPU: pin workers to CPUs
  int worker_nice = 0;         // CPU: > 0 lowers the workers' priority below the HTTP threads
  double gpu_memory_utilization = 0.9;  // CUDA: share of device memory the process may use
  bool enforce_eager = false;           // CUDA: no CUDA graphs
};

/// Names of the backends this binary can build here: "cpu", and "cuda" when built with CUDA and a
/// CUDA device answers (any CUDA error at the device query counts as "no device").
std::vector<std::string> registered_backends();

/// Builds the backend for options.device. Throws qs::Error "qwenserve was built without CUDA
/// support: --device cuda is not available" for cuda in a CPU-only build, "no CUDA device found"
/// in a CUDA build without a device, and names the choices for an unknown device.
std::unique_ptr<Backend> make_backend(const BackendOptions& options);

/// The kernel paths `device` would use on this machine, one line (for `qwenserve info`), e.g.
/// "matmul=avx2 attention=avx2 ..." for cpu. Throws like make_backend for an unavailable device.
std::string backend_kernel_paths(const std::string& device);

}  // namespace qs
