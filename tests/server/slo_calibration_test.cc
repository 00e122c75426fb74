// SloCalibration: the admission margin is the nearest-rank 99th percentile of measured / predicted
// TTFT over the recent requests predicted near the SLO (server/slo_calibration.h).
#include "server/slo_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace qs {
namespace {

TEST(SloCalibration, OneUntilEnoughSamplesNearTheBoundary) {
  SloCalibration c;
  for (int i = 0; i < 100; ++i) c.record(400, 1600, 1000);  // predicted below T / 2: not counted
  EXPECT_EQ(c.samples(), 0u);
  for (size_t i = 0; i + 1 < SloCalibration::kMinSamples; ++i) c.record(800, 1600, 1000);
  EXPECT_EQ(c.factor(), 1.0) << "fewer than kMinSamples";
  c.record(800, 1600, 1000);
  EXPECT_EQ(c.factor(), 2.0);
  c.record(NAN, 1000, 1000);
  c.record(800, 1000, 0);  // no SLO
  c.record(800, -1, 1000);
  EXPECT_EQ(c.samples(), SloCalibration::kMinSamples);
}

TEST(SloCalibration, FactorIsTheNearestRank95thPercentileOfTheWindowClamped) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<double> ratio(0.7, 1.4);
  SloCalibration c;
  std::vector<double> all;
  for (int i = 0; i < 500; ++i) {
    const double r = ratio(rng);
    all.push_back(r);
    c.record(1000, 1000 * r, 1200);
  }
  // Reference: the last kWindow ratios sorted; nearest rank ceil(0.99 n) (Hyndman & Fan type 1).
  std::vector<double> window(all.end() - static_cast<std::ptrdiff_t>(SloCalibration::kWindow), all.end());
  std::sort(window.begin(), window.end());
  const double expected = window[static_cast<size_t>(std::ceil(0.99 * static_cast<double>(window.size()))) - 1];
  EXPECT_NEAR(c.factor(), std::max(1.0, expected), 1e-12);
  EXPECT_EQ(c.samples(), SloCalibration::kWindow);
  SloCalibration fast;  // measured always below predicted: no margin below 1
  for (int i = 0; i < 50; ++i) fast.record(1000, 500, 1000);
  EXPECT_EQ(fast.factor(), 1.0);
  SloCalibration slow;  // a margin never above kMaxFactor
  for (int i = 0; i < 50; ++i) slow.record(1000, 9000, 1000);
  EXPECT_EQ(slow.factor(), SloCalibration::kMaxFactor);
}

}  // namespace
}  // namespace qs
