#include "server/slo_calibration.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace qs {

void SloCalibration::record(double predicted_ms, double measured_ms, double slo_ms) {
  if (!(predicted_ms > 0) || !(measured_ms > 0) || !(slo_ms > 0) || !std::isfinite(predicted_ms) ||
      !std::isfinite(measured_ms) || predicted_ms < slo_ms / 2) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ratios_.push_back(measured_ms / predicted_ms);
  if (ratios_.size() > kWindow) ratios_.pop_front();
}

double SloCalibration::factor() const {
  std::vector<double> sorted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ratios_.size() < kMinSamples) return 1.0;
    sorted.assign(ratios_.begin(), ratios_.end());
  }
  // Nearest rank: the smallest sample with at least kQuantile of the samples at or below it.
  const auto rank = static_cast<size_t>(std::ceil(kQuantile * static_cast<double>(sorted.size())));
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(rank - 1), sorted.end());
  return std::clamp(sorted[rank - 1], 1.0, kMaxFactor);
}

size_t SloCalibration::samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ratios_.size();
}

SloCalibration& slo_calibration() {
  static SloCalibration* calibration = new SloCalibration;  // never destroyed: used by HTTP threads
  return *calibration;
}

}  // namespace qs
