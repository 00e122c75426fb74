// The CPU kernels' instruction-set levels (core/cpu_isa.h), under their kernels:: names.
#pragma once

#include "core/cpu_isa.h"

namespace qs::kernels {

using qs::active_cpu_isa;
using qs::cpu_has_isa;
using qs::CpuIsa;
using qs::cpu_isa_name;
using qs::detected_cpu_isa;
using qs::IsaSlots;
using qs::parse_cpu_isa;
using qs::pick_isa_slot;
using qs::select_cpu_isa;

}  // namespace qs::kernels
