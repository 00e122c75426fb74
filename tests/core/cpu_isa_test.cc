// detected_cpu_isa (core/cpu_isa.h) against the Linux kernel's view of the CPU: the "flags" line of
// /proc/cpuinfo, which the kernel clears of features the OS does not enable (e.g. AVX without
// XSAVE). Runs in every build, so the clang sanitizer build (whose __builtin_cpu_supports lacks
// "f16c", read from CPUID instead) is held to the same answer as gcc's.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/cpu_isa.h"

namespace qs {
namespace {

// The feature names of the first "flags" line of /proc/cpuinfo (empty when there is none).
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

// The level cpu_isa.h defines for a set of Linux feature names.
CpuIsa level_of(const std::set<std::string>& f) {
  auto has = [&](const char* name) { return f.count(name) != 0; };
  if (!(has("avx2") && has("fma") && has("f16c"))) return CpuIsa::kScalar;
  if (!(has("avx512f") && has("avx512bw") && has("avx512vl"))) return CpuIsa::kAvx2;
  if (!has("avx512_vnni")) return CpuIsa::kAvx512;
  if (!has("avx512_bf16")) return CpuIsa::kAvx512Vnni;
  // Linux lists amx_tile / amx_int8 only when it supports the tile state, which it then grants on
  // request (core/cpu_isa.cc).
  if (!(has("amx_tile") && has("amx_int8"))) return CpuIsa::kAvx512Bf16;
  return CpuIsa::kAmx;
}

TEST(CpuIsaDetection, MatchesTheKernelsCpuinfoFlags) {
#if !(defined(__x86_64__) || defined(__i386__))
  GTEST_SKIP() << "not x86";
#endif
  const std::set<std::string> flags = cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  EXPECT_EQ(cpu_isa_name(detected_cpu_isa()), cpu_isa_name(level_of(flags)));
}

}  // namespace
}  // namespace qs
