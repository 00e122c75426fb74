#include "constrained/token_mask_cache.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "constrained/pda.h"
#include "core/error.h"

namespace qs::constrained {

namespace {

struct VectorHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ULL;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ULL;
    return h;
  }
};

/// Parser states (sets of approximate-mode stacks) interned to ids, with a lazily filled
/// transition row per state (-2 unknown, -1 dead) over byte classes: bytes that every byte set
/// of the grammar treats alike share one column, which keeps the rows small and cache-resident.
class StateTable {
 public:
  StateTable(const Grammar& g, size_t max_states) : pool_(g, true), max_states_(max_states) {
    std::map<std::vector<bool>, uint8_t> ids;
    for (int b = 0; b < 256; ++b) {
      std::vector<bool> signature(g.sets.size());
      for (size_t k = 0; k < g.sets.size(); ++k) signature[k] = g.sets[k].has(static_cast<uint8_t>(b));
      auto [it, fresh] = ids.emplace(signature, static_cast<uint8_t>(representative_.size()));
      if (fresh) representative_.push_back(static_cast<uint8_t>(b));
      class_of_[b] = it->second;
    }
    classes_ = representative_.size();
  }

  int32_t single(int32_t pos) { return intern({pool_.single(pos)}); }

  int32_t next(int32_t state, uint8_t b) {
    const size_t at = static_cast<size_t>(state) * classes_ + class_of_[b];
    if (trans_[at] != -2) return trans_[at];
    pool_.step(states_[state], b, scratch_);
    const int32_t r = scratch_.empty() ? -1 : intern(scratch_);
    trans_[at] = r;  // re-indexed: intern may have grown trans_
    return r;
  }
  /// A token ending in this state: 2 accepted, 1 uncertain.
  uint8_t verdict(int32_t state) const { return verdict_[state]; }

 private:
  int32_t intern(const std::vector<int32_t>& stacks) {
    auto [it, fresh] = ids_.emplace(stacks, static_cast<int32_t>(states_.size()));
    if (fresh) {
      if (states_.size() >= max_states_) {
        throw Error("grammar too complex: more than " + std::to_string(max_states_) +
                    " parser states while building token masks (compile limit)");
      }
      states_.push_back(stacks);
      trans_.resize(trans_.size() + classes_, -2);
      bool exact = false;
      for (int32_t s : stacks) exact = exact || !pool_.is_approx(s);
      verdict_.push_back(exact ? 2 : 1);
    }
    return it->second;
  }

  StackPool pool_;
  size_t max_states_;
  uint8_t class_of_[256];
  std::vector<uint8_t> representative_;
  size_t classes_ = 0;
  std::vector<std::vector<int32_t>> states_;
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> ids_;
  std::vector<int32_t> trans_;
  std::vector<uint8_t> verdict_;
  std::vector<int32_t> scratch_;
};

}  // namespace

std::vector<PositionTokens> build_token_mask_cache(const Grammar& grammar,
                                                   const TokenVocabulary& vocab,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   size_t max_parser_states) {
  std::vector<PositionTokens> out(grammar.elements.size());
  StateTable table(grammar, max_parser_states);
  const auto& trie = vocab.trie();
  const auto& tokens = vocab.trie_tokens();
  const size_t words = static_cast<size_t>(vocab.mask_words());
  std::vector<int32_t> depth_state(static_cast<size_t>(vocab.max_token_bytes()) + 1);
  std::vector<int32_t> accepted;
  for (size_t pos = 0; pos < grammar.elements.size(); ++pos) {
    if (grammar.elements[pos].kind != Element::Kind::kBytes) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error("grammar compile time limit exceeded while building token masks");
    }
    PositionTokens& pt = out[pos];
    accepted.clear();
    depth_state[0] = table.single(static_cast<int32_t>(pos));
    const ByteSet& first = grammar.sets[grammar.elements[pos].arg];
    for (size_t i = 0; i < trie.size();) {
      const auto& node = trie[i];
      if (node.depth == 1 && !first.has(node.byte)) {
        i = static_cast<size_t>(node.skip);
        continue;
      }
      const int32_t st = table.next(depth_state[node.depth - 1], node.byte);
      if (st < 0) {
        i = static_cast<size_t>(node.skip);
        continue;
      }
      depth_state[node.depth] = st;
      if (node.has_tokens) {
        const uint8_t v = table.verdict(st);
        auto& dst = v == 2 ? accepted : pt.uncertain;
        const auto [begin, end] = vocab.token_range(i);
        for (int32_t k = begin; k < end; ++k) dst.push_back(tokens[k]);
      }
      ++i;
    }
    // A bitmask costs `words` word ORs at mask time, a list one scattered store per id.
    if (accepted.size() > words / 4) {
      pt.accepted_bits.assign(words, 0);
      for (int32_t id : accepted) pt.accepted_bits[id >> 5] |= 1u << (id & 31);
    } else {
      std::sort(accepted.begin(), accepted.end());
      pt.accepted_ids = accepted;
    }
    std::sort(pt.uncertain.begin(), pt.uncertain.end());
  }
  return out;
}

}  // namespace qs::constrained
