// Sizing the serving KV cache: byte counts with unit suffixes, the machine's memory and the block
// count for a budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qs {

/// Parses a byte count: "1073741824", "512MiB", "2GiB", "1.5G" (K/M/G/T and KiB/MiB/GiB/TiB are
/// powers of 1024; KB/MB/GB/TB powers of 1000; a trailing "B" is allowed). Case-insensitive
/// units. Throws qs::Error naming the text when it is not a non-negative size.
size_t parse_byte_size(std::string_view text);

/// "512.0 MiB", "1.5 GiB", "999.0 TiB": `bytes` in the largest power-of-1024 unit that gives a
/// value >= 1 (one decimal; "B" below 1 KiB).
std::string format_byte_size(size_t bytes);

/// Physical memory of the machine in bytes (sysconf _SC_PHYS_PAGES x _SC_PAGESIZE), 0 when unknown.
size_t physical_memory_bytes();

/// MemAvailable from /proc/meminfo in bytes, 0 when unknown.
size_t available_memory_bytes();

/// Throws qs::Error naming --kv-cache-memory and both sizes when `budget_bytes` exceeds
/// `physical_bytes` (such a cache cannot be held in memory) or `available_bytes` (MemAvailable:
/// the OOM killer would end the process instead of a clear error). 0 means unknown: no check.
void check_kv_budget_fits(size_t budget_bytes, size_t physical_bytes, size_t available_bytes = 0);

struct KvBudgetInput {
  size_t bytes_per_block = 0;           // Backend::kv_bytes_per_block
  int64_t ctx_tokens = 0;               // context of one sequence
  int32_t max_num_seqs = 1;             // sequences running at once
  std::optional<size_t> budget_bytes;   // --kv-cache-memory; nullopt: from available memory
  size_t available_bytes = 0;           // MemAvailable (0: unknown)
  size_t physical_bytes = 0;            // physical memory (0: unknown)
  double available_fraction = 0.25;     // share of available memory used by default
};

/// Blocks to allocate. An explicit budget gives floor(budget / bytes_per_block) blocks (throws
/// qs::Error when that is 0, or as check_kv_budget_fits when it exceeds physical memory). The default is `available_fraction` of available memory, capped
/// at what max_num_seqs full contexts need and never below one full context.
int32_t kv_blocks_for_budget(const KvBudgetInput& in);

}  // namespace qs
