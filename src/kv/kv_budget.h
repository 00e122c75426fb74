// Sizing the serving KV cache: byte counts with unit suffixes and the block count for a budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace qs {

/// Parses a byte count: "1073741824", "512MiB", "2GiB", "1.5G" (K/M/G/T and KiB/MiB/GiB/TiB are
/// powers of 1024; KB/MB/GB/TB powers of 1000; a trailing "B" is allowed). Case-insensitive
/// units. Throws qs::Error naming the text when it is not a non-negative size.
size_t parse_byte_size(std::string_view text);

struct KvBudgetInput {
  size_t bytes_per_block = 0;           // KvCache::bytes_per_block
  int64_t ctx_tokens = 0;               // context of one sequence
  int32_t max_num_seqs = 1;             // sequences running at once
  std::optional<size_t> budget_bytes;   // --kv-cache-memory; nullopt: from available memory
  size_t available_bytes = 0;           // MemAvailable (0: unknown)
  double available_fraction = 0.25;     // share of available memory used by default
};

/// Blocks to allocate. An explicit budget gives floor(budget / bytes_per_block) blocks (throws
/// qs::Error when that is 0). The default is `available_fraction` of available memory, capped
/// at what max_num_seqs full contexts need and never below one full context.
int32_t kv_blocks_for_budget(const KvBudgetInput& in);

}  // namespace qs
