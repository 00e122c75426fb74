// KV budget limits: a --kv-cache-memory above the machine's physical memory is rejected with both
// sizes named; byte sizes print in binary units.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "kv/kv_budget.h"

namespace qs {
namespace {

std::string error_of(size_t budget, size_t physical) {
  try {
    check_kv_budget_fits(budget, physical);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KvBudgetLimit, BudgetAboveAvailableMemoryIsRejectedNamingOptionAndMemAvailable) {
  const size_t physical = 16ull << 30, available = 3ull << 30;
  std::string message;
  try {
    check_kv_budget_fits(4ull << 30, physical, available);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("--kv-cache-memory"), std::string::npos) << message;
  EXPECT_NE(message.find("MemAvailable 3.0 GiB"), std::string::npos) << message;
  EXPECT_NO_THROW(check_kv_budget_fits(3ull << 30, physical, available)) << "exactly MemAvailable fits";
  EXPECT_NO_THROW(check_kv_budget_fits(4ull << 30, physical, 0)) << "MemAvailable unknown: no check";
}

TEST(KvBudgetLimit, BudgetAbovePhysicalMemoryIsRejectedNamingOptionAndBothSizes) {
  const size_t physical = 16ull << 30;
  const size_t budget = parse_byte_size("999TiB");
  const std::string message = error_of(budget, physical);
  EXPECT_NE(message.find("--kv-cache-memory"), std::string::npos) << message;
  EXPECT_NE(message.find("999.0 TiB"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(999ull << 40)), std::string::npos) << message;
  EXPECT_NE(message.find("16.0 GiB"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(16ull << 30)), std::string::npos) << message;
}

TEST(KvBudgetLimit, BudgetUpToPhysicalMemoryOrUnknownMemoryPasses) {
  EXPECT_EQ(error_of(16ull << 30, 16ull << 30), "");
  EXPECT_EQ(error_of(1, 16ull << 30), "");
  EXPECT_EQ(error_of(999ull << 40, 0), "") << "0: physical memory unknown, nothing to check";
  EXPECT_NE(error_of((16ull << 30) + 1, 16ull << 30), "");
}

TEST(KvBudgetLimit, BlocksForBudgetAppliesTheLimitToExplicitBudgetsOnly) {
  KvBudgetInput in;
  in.bytes_per_block = 1000;
  in.ctx_tokens = 160;
  in.max_num_seqs = 4;
  in.available_bytes = 1'000'000;
  in.physical_bytes = 10'000;
  EXPECT_EQ(kv_blocks_for_budget(in), 40) << "the default budget is sized from available memory";
  in.budget_bytes = 10'000;
  EXPECT_EQ(kv_blocks_for_budget(in), 10);
  in.budget_bytes = 10'001;
  EXPECT_THROW(kv_blocks_for_budget(in), Error);
}

TEST(KvBudgetLimit, MachineMemoryIsKnownAndAvailableDoesNotExceedPhysical) {
  const size_t physical = physical_memory_bytes();
  const size_t available = available_memory_bytes();
  EXPECT_GT(physical, 0u);
  EXPECT_GT(available, 0u);
  EXPECT_LE(available, physical);
}

TEST(KvBudgetLimit, FormatsByteSizesInBinaryUnits) {
  EXPECT_EQ(format_byte_size(0), "0 B");
  EXPECT_EQ(format_byte_size(1023), "1023 B");
  EXPECT_EQ(format_byte_size(1024), "1.0 KiB");
  EXPECT_EQ(format_byte_size(1536ull << 20), "1.5 GiB");
  EXPECT_EQ(format_byte_size(512ull << 20), "512.0 MiB");
  EXPECT_EQ(format_byte_size(999ull << 40), "999.0 TiB");
}

}  // namespace
}  // namespace qs
