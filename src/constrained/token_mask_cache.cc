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

ByteClasses compute_byte_classes(const Grammar& g) {
  ByteClasses c;
  std::map<std::vector<bool>, uint8_t> ids;
  for (int b = 0; b < 256; ++b) {
    std::vector<bool> signature(g.sets.size());
    for (size_t k = 0; k < g.sets.size(); ++k) signature[k] = g.sets[k].has(static_cast<uint8_t>(b));
    auto [it, fresh] = ids.emplace(signature, static_cast<uint8_t>(c.count));
    if (fresh) ++c.count;
    c.class_of[b] = it->second;
  }
  return c;
}

/// Parser states (sets of approximate-mode stacks) interned to ids, with a lazily filled
/// transition row per state (-2 unknown, -1 dead) over byte classes: bytes that every byte set
/// of the grammar treats alike share one column, which keeps the rows small and cache-resident.
class StateTable {
 public:
  StateTable(const Grammar& g, const ByteClasses& classes, size_t max_states)
      : pool_(g, true), classes_(classes), max_states_(max_states) {}

  int32_t single(int32_t pos) { return intern({pool_.single(pos)}); }

  int32_t next(int32_t state, uint8_t b) {
    const size_t at = static_cast<size_t>(state) * classes_.count + classes_.class_of[b];
    if (trans_[at] != -2) return trans_[at];
    pool_.step(states_[state], b, scratch_);
    const int32_t r = scratch_.empty() ? -1 : intern(scratch_);
    trans_[at] = r;  // re-indexed: intern may have grown trans_
    return r;
  }
  /// A token ending in this state: 2 accepted, 1 uncertain, 3 conditional (stay() / exit()).
  uint8_t verdict(int32_t state) const { return verdict_[state]; }
  int32_t stay(int32_t state) const { return stay_[state]; }
  int32_t exit(int32_t state) const { return exit_[state]; }
  /// The raw transition rows for the walk's inner loop: entry state * n_classes() +
  /// class_of()[b] is next(state, b) once known, -2 before (the pointer changes when next()
  /// adds a state).
  const int32_t* transitions() const { return trans_.data(); }
  size_t n_classes() const { return classes_.count; }
  const uint8_t* class_of() const { return classes_.class_of; }

 private:
  int32_t intern(const std::vector<int32_t>& stacks) {
    auto [it, fresh] = ids_.emplace(stacks, static_cast<int32_t>(states_.size()));
    if (fresh) {
      if (states_.size() >= max_states_) {
        throw Error("grammar too complex: more than " + std::to_string(max_states_) +
                    " parser states while building token masks (compile limit)");
      }
      states_.push_back(stacks);
      trans_.resize(trans_.size() + classes_.count, -2);
      // Unconditional exact stacks accept; otherwise exact conditional stacks make the token
      // conditional (the least `stay`, one `exit` value) unless an approximated stack or two
      // different exits would need an exact check at mask time.
      bool uncond = false, approx = false, two_exits = false;
      int32_t stay = -1, exit = -1;
      for (int32_t s : stacks) {
        if (pool_.is_approx(s)) {
          approx = true;
          continue;
        }
        const StackPool::Condition c = pool_.condition(s);
        if (c.kind == 0) uncond = true;
        if (c.kind == 1 && (stay < 0 || c.value < stay)) stay = c.value;
        if (c.kind == 2) {
          two_exits = two_exits || (exit >= 0 && exit != c.value);
          exit = c.value;
        }
      }
      const bool conditional = stay >= 0 || exit >= 0;
      verdict_.push_back(uncond ? 2 : (conditional && !approx && !two_exits) ? 3 : 1);
      stay_.push_back(stay);
      exit_.push_back(exit);
    }
    return it->second;
  }

  StackPool pool_;
  const ByteClasses& classes_;
  size_t max_states_;
  std::vector<std::vector<int32_t>> states_;
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> ids_;
  std::vector<int32_t> trans_;
  std::vector<uint8_t> verdict_;
  std::vector<int32_t> stay_, exit_;
  std::vector<int32_t> scratch_;
};

// Classifies every token at kBytes position `pos` by one walk over the trie. `bits` is scratch of
// mask_words() zero words (accepted tokens are set there directly), zero again on return.
PositionTokens classify(const Grammar& grammar, const TokenVocabulary& vocab, StateTable& table, size_t pos,
                        std::vector<uint32_t>& bits) {
  PositionTokens pt;
  const auto& trie = vocab.trie();
  const auto& tokens = vocab.trie_tokens();
  std::vector<int32_t> depth_state(static_cast<size_t>(vocab.max_token_bytes()) + 1);
  size_t n_accepted = 0;
  depth_state[0] = table.single(static_cast<int32_t>(pos));
  const ByteSet& first = grammar.sets[grammar.elements[pos].arg];
  // The inner loop reads the transition rows directly (one load per trie node when known) and
  // calls next() only for a transition not computed yet.
  const uint8_t* class_of = table.class_of();
  const size_t n_classes = table.n_classes();
  const int32_t* trans = table.transitions();
  int32_t* states = depth_state.data();
  uint32_t* words = bits.data();
  const size_t n_nodes = trie.size();
  for (size_t i = 0; i < n_nodes;) {
    const TokenVocabulary::TrieNode node = trie[i];
    if (node.depth == 1 && !first.has(node.byte)) {
      i = static_cast<size_t>(node.skip);
      continue;
    }
    const int32_t prev = states[node.depth - 1];
    int32_t st = trans[static_cast<size_t>(prev) * n_classes + class_of[node.byte]];
    if (st == -2) {
      st = table.next(prev, node.byte);
      trans = table.transitions();
    }
    if (st < 0) {
      i = static_cast<size_t>(node.skip);
      continue;
    }
    states[node.depth] = st;
    if (node.has_tokens) {
      const auto [begin, end] = vocab.token_range(i);
      const uint8_t verdict = table.verdict(st);
      if (verdict == 2) {
        for (int32_t k = begin; k < end; ++k) words[tokens[k] >> 5] |= 1u << (tokens[k] & 31);
        n_accepted += static_cast<size_t>(end - begin);
      } else if (verdict == 3) {
        for (int32_t k = begin; k < end; ++k) pt.conditional.push_back({tokens[k], table.stay(st), table.exit(st)});
      } else {
        pt.uncertain.insert(pt.uncertain.end(), tokens.begin() + begin, tokens.begin() + end);
      }
    }
    ++i;
  }
  // A bitmask costs mask_words() word ORs at mask time, a list one scattered store per id.
  if (n_accepted > bits.size() / 4) {
    pt.accepted_bits = bits;
  } else {
    pt.accepted_ids.reserve(n_accepted);
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint32_t word = bits[w]; word != 0; word &= word - 1) {
        pt.accepted_ids.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(word))));
      }
    }
  }
  std::fill(bits.begin(), bits.end(), 0u);
  std::sort(pt.uncertain.begin(), pt.uncertain.end());
  std::sort(pt.conditional.begin(), pt.conditional.end(),
            [](const ConditionalToken& a, const ConditionalToken& b) { return a.id < b.id; });
  return pt;
}

// Every token whose first byte may start at `pos`, as uncertain (checked exactly at mask time).
PositionTokens all_uncertain(const Grammar& grammar, const TokenVocabulary& vocab, size_t pos) {
  PositionTokens pt;
  const auto& trie = vocab.trie();
  const ByteSet& first = grammar.sets[grammar.elements[pos].arg];
  for (size_t i = 0; i < trie.size(); ++i) {
    if (trie[i].depth == 1 && !first.has(trie[i].byte)) {
      i = static_cast<size_t>(trie[i].skip) - 1;
      continue;
    }
    if (!trie[i].has_tokens) continue;
    const auto [begin, end] = vocab.token_range(i);
    pt.uncertain.insert(pt.uncertain.end(), vocab.trie_tokens().begin() + begin, vocab.trie_tokens().begin() + end);
  }
  std::sort(pt.uncertain.begin(), pt.uncertain.end());
  return pt;
}

}  // namespace

bool TokenMaskCache::classified_at_compile(const Grammar& grammar, size_t pos) {
  return grammar.elements[pos].kind == Element::Kind::kBytes &&
         (pos == 0 || grammar.elements[pos - 1].kind != Element::Kind::kBytes);
}

TokenMaskCache::TokenMaskCache(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                               std::chrono::steady_clock::time_point deadline, size_t max_parser_states,
                               bool classify_all_now)
    : grammar_(grammar),
      vocab_(std::move(vocab)),
      classes_(compute_byte_classes(grammar)),
      max_parser_states_(max_parser_states),
      entries_(grammar.elements.size()),
      built_(new std::atomic<uint8_t>[grammar.elements.size()]) {
  StateTable table(grammar_, classes_, max_parser_states_);
  std::vector<uint32_t> bits(static_cast<size_t>(vocab_->mask_words()), 0u);
  for (size_t pos = 0; pos < grammar_.elements.size(); ++pos) {
    const bool bytes = grammar_.elements[pos].kind == Element::Kind::kBytes;
    built_[pos].store(bytes ? 0 : 1, std::memory_order_relaxed);
    if (!bytes || !(classify_all_now || classified_at_compile(grammar_, pos))) continue;
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error("grammar compile time limit exceeded while building token masks");
    }
    entries_[pos] = classify(grammar_, *vocab_, table, pos, bits);
    built_[pos].store(1, std::memory_order_relaxed);
  }
}

TokenMaskCache::~TokenMaskCache() = default;

const PositionTokens& TokenMaskCache::at(int32_t pos) const {
  const auto p = static_cast<size_t>(pos);
  if (built_[p].load(std::memory_order_acquire) != 0) return entries_[p];
  std::lock_guard lock(build_mu_);
  if (built_[p].load(std::memory_order_relaxed) == 0) {
    PositionTokens pt;
    try {
      StateTable table(grammar_, classes_, max_parser_states_);
      std::vector<uint32_t> bits(static_cast<size_t>(vocab_->mask_words()), 0u);
      pt = classify(grammar_, *vocab_, table, p, bits);
    } catch (const Error&) {
      pt = all_uncertain(grammar_, *vocab_, p);  // parser-state limit: exact checks at mask time
    }
    entries_[p] = std::move(pt);
    built_[p].store(1, std::memory_order_release);
  }
  return entries_[p];
}

size_t TokenMaskCache::memory_bytes() const {
  std::lock_guard lock(build_mu_);
  size_t n = entries_.size() * (sizeof(PositionTokens) + 1);
  for (size_t p = 0; p < entries_.size(); ++p) {
    if (built_[p].load(std::memory_order_relaxed) != 0) n += entries_[p].memory_bytes();
  }
  return n;
}

size_t TokenMaskCache::n_built() const {
  size_t n = 0;
  for (size_t p = 0; p < entries_.size(); ++p) {
    n += grammar_.elements[p].kind == Element::Kind::kBytes && built_[p].load(std::memory_order_acquire) != 0;
  }
  return n;
}

}  // namespace qs::constrained
