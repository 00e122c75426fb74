// core/stats.h: the median by its definition (middle element of the sorted samples; mean of the two
// middle ones for an even count).
#include "core/stats.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace qs {
namespace {

TEST(Stats, MedianIsTheMiddleOfTheSortedSamples) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({5.0}), 5.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median({9.0, -1.0}), 4.0);
}

TEST(Stats, MedianOfNoSamplesIsAnError) { EXPECT_THROW(median(std::vector<double>{}), Error); }

}  // namespace
}  // namespace qs
