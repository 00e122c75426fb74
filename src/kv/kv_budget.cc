#include "kv/kv_budget.h"

#include <algorithm>
#include <cctype>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "core/error.h"
#include "kv/kv_types.h"

namespace qs {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

double unit_multiplier(const std::string& unit) {
  static const struct {
    const char* name;
    double factor;
  } kUnits[] = {{"", 1},      {"b", 1},      {"k", 0x1p10},   {"kib", 0x1p10}, {"kb", 1e3},
                {"m", 0x1p20}, {"mib", 0x1p20}, {"mb", 1e6},  {"g", 0x1p30},  {"gib", 0x1p30},
                {"gb", 1e9},   {"t", 0x1p40},  {"tib", 0x1p40}, {"tb", 1e12}};
  for (const auto& u : kUnits) {
    if (unit == u.name) return u.factor;
  }
  return -1;
}

}  // namespace

size_t parse_byte_size(std::string_view text) {
  const std::string s = lower(text);
  size_t end = 0;
  while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.')) ++end;
  std::string unit = s.substr(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  const double factor = unit_multiplier(unit);
  double number = 0;
  bool ok = end > 0 && factor > 0;
  if (ok) {
    try {
      size_t used = 0;
      number = std::stod(s.substr(0, end), &used);
      ok = used == end && std::isfinite(number) && number >= 0;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  const double bytes = number * factor;
  if (!ok || bytes >= static_cast<double>(std::numeric_limits<int64_t>::max())) {
    throw Error("invalid byte size '" + std::string(text) + "' (examples: 1073741824, 512MiB, 2GiB, 4GB)");
  }
  return static_cast<size_t>(bytes);
}

std::string format_byte_size(size_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) {
    std::snprintf(buffer, sizeof buffer, "%zu B", bytes);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f %s", value, kUnits[unit]);
  }
  return buffer;
}

size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

size_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

void check_kv_budget_fits(size_t budget_bytes, size_t physical_bytes, size_t available_bytes) {
  if (available_bytes > 0 && budget_bytes > available_bytes && (physical_bytes == 0 || budget_bytes <= physical_bytes)) {
    throw Error("--kv-cache-memory " + format_byte_size(budget_bytes) + " (" + std::to_string(budget_bytes) +
                " bytes) exceeds the memory now available (MemAvailable " + format_byte_size(available_bytes) + ", " +
                std::to_string(available_bytes) + " bytes): the cache would be paged out or the process killed; "
                "lower --kv-cache-memory");
  }
  if (physical_bytes == 0 || budget_bytes <= physical_bytes) return;
  throw Error("--kv-cache-memory " + format_byte_size(budget_bytes) + " (" + std::to_string(budget_bytes) +
              " bytes) exceeds this machine's physical memory of " + format_byte_size(physical_bytes) + " (" +
              std::to_string(physical_bytes) + " bytes)");
}

int32_t kv_blocks_for_budget(const KvBudgetInput& in) {
  if (in.bytes_per_block == 0) throw Error("KV budget: zero bytes per block");
  const int64_t one_context = (in.ctx_tokens + kKvBlockSize - 1) / kKvBlockSize;
  const int64_t all_contexts = one_context * std::max<int32_t>(in.max_num_seqs, 1);
  const int64_t kMaxBlocks = std::numeric_limits<int32_t>::max();
  if (in.budget_bytes) {
    check_kv_budget_fits(*in.budget_bytes, in.physical_bytes, in.available_bytes);
    const auto blocks = static_cast<int64_t>(std::min<size_t>(*in.budget_bytes / in.bytes_per_block, kMaxBlocks));
    if (blocks < 1) {
      throw Error("--kv-cache-memory " + std::to_string(*in.budget_bytes) + " bytes holds no KV block (one block of " +
                  std::to_string(kKvBlockSize) + " tokens takes " + std::to_string(in.bytes_per_block) + " bytes)");
    }
    return static_cast<int32_t>(blocks);
  }
  int64_t blocks = all_contexts;
  if (in.available_bytes > 0) {
    const double share = static_cast<double>(in.available_bytes) * in.available_fraction;
    blocks = std::min<int64_t>(blocks, static_cast<int64_t>(share / static_cast<double>(in.bytes_per_block)));
  }
  return static_cast<int32_t>(std::clamp<int64_t>(blocks, std::max<int64_t>(one_context, 1), kMaxBlocks));
}

}  // namespace qs
