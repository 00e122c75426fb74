#include "backend/cpu/kernels/kernel_paths.h"

#include "backend/cpu/kernels/cpu_isa.h"
#include "backend/cpu/kernels/dot_kernels.h"
#include "backend/cpu/kernels/norm_rope.h"
#include "backend/cpu/kernels/paged_attention.h"
#include "formats/dequantize_kernels.h"

namespace qs::kernels {

std::string cpu_kernel_paths() {
  const ElementwiseKernels& elementwise = active_elementwise_kernels();
  std::string out = "cpu=" + std::string(cpu_isa_name(detected_cpu_isa()));
  const auto add = [&out](const char* family, CpuIsa isa) {
    out += ' ';
    out += family;
    out += '=';
    out += cpu_isa_name(isa);
  };
  add("matmul", active_dot_kernels().isa);
  add("attention", active_attention_kernels().isa);
  add("norm", elementwise.isa);
  add("rope", elementwise.isa);
  add("silu", elementwise.isa);
  add("convert", active_dequantize_kernels().isa);
  return out;
}

}  // namespace qs::kernels
