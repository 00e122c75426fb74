#include "constrained/compiled_grammar.h"

#include <algorithm>
#include <mutex>

namespace qs::constrained {

void merge_tops(const std::vector<int32_t>& tops, const TokenMaskCache& positions, size_t words,
                uint32_t* accepted, std::vector<int32_t>& uncertain) {
  uncertain.clear();
  for (size_t i = 0; i + 2 < tops.size(); i += 3) {
    const PositionTokens& pt = positions.at(tops[i]);
    if (!pt.accepted_bits.empty()) {
      const uint32_t* src = pt.accepted_bits.data();
      for (size_t w = 0; w < words; ++w) accepted[w] |= src[w];
    }
    for (int32_t id : pt.accepted_ids) accepted[id >> 5] |= 1u << (id & 31);
    for (const ConditionalToken& c : pt.conditional) {
      if (c.holds(tops[i + 1], tops[i + 2])) accepted[c.id >> 5] |= 1u << (c.id & 31);
    }
  }
  for (size_t i = 0; i + 2 < tops.size(); i += 3) {
    for (int32_t id : positions.at(tops[i]).uncertain) {
      if (!((accepted[id >> 5] >> (id & 31)) & 1)) uncertain.push_back(id);
    }
  }
  std::sort(uncertain.begin(), uncertain.end());
  uncertain.erase(std::unique(uncertain.begin(), uncertain.end()), uncertain.end());
}

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
  merge_tops(tops, positions, words, e->accepted.data(), e->uncertain);
  std::unique_lock lock(mu_);
  auto [it, fresh] = entries_.emplace(tops, std::move(e));
  return it->second.get();
}

}  // namespace qs::constrained
