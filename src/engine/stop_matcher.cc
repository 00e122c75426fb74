#include "engine/stop_matcher.h"

#include <algorithm>

namespace qs {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings) {
    if (!s.empty()) stop_strings_.push_back(std::move(s));
  }
}

StopMatcher::Result StopMatcher::push(std::string_view delta, bool may_stop) {
  Result result;
  if (stopped_) return result;
  pending_.append(delta);
  // Earliest complete occurrence of any stop string.
  size_t first = std::string::npos;
  if (may_stop) {
    for (const auto& stop : stop_strings_) first = std::min(first, pending_.find(stop));
  }
  if (first != std::string::npos) {
    result.text = pending_.substr(0, first);
    result.stopped = true;
    stopped_ = true;
    pending_.clear();
    return result;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& stop : stop_strings_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  result.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return result;
}

std::string StopMatcher::flush() {
  std::string rest;
  if (!stopped_) rest.swap(pending_);
  return rest;
}

}  // namespace qs
