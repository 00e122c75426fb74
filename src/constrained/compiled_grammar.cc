#include "constrained/compiled_grammar.h"

#include <algorithm>
#include <mutex>

namespace qs::constrained {

const TopsMaskCache::Entry* TopsMaskCache::find_or_build(const std::vector<int32_t>& tops,
                                                         const TokenMaskCache& positions, size_t words) {
  {
    std::shared_lock lock(mu_);
    auto it = entries_.find(tops);
    if (it != entries_.end()) return it->second.get();
    if (entries_.size() >= max_entries_) return nullptr;
  }
  auto e = std::make_unique<Entry>();
  e->accepted.assign(words, 0);
  for (int32_t p : tops) {
    const PositionTokens& pt = positions.at(p);
    if (!pt.accepted_bits.empty()) {
      for (size_t w = 0; w < words; ++w) e->accepted[w] |= pt.accepted_bits[w];
    }
    for (int32_t id : pt.accepted_ids) e->accepted[id >> 5] |= 1u << (id & 31);
  }
  for (int32_t p : tops) {
    for (int32_t id : positions.at(p).uncertain) {
      if (!((e->accepted[id >> 5] >> (id & 31)) & 1)) e->uncertain.push_back(id);
    }
  }
  std::sort(e->uncertain.begin(), e->uncertain.end());
  e->uncertain.erase(std::unique(e->uncertain.begin(), e->uncertain.end()), e->uncertain.end());
  std::unique_lock lock(mu_);
  auto [it, fresh] = entries_.emplace(tops, std::move(e));
  return it->second.get();
}

}  // namespace qs::constrained
