#include "constrained/grammar_matcher.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/error.h"

namespace qs::constrained {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, size_t max_rollback)
    : grammar_(std::move(grammar)),
      max_rollback_(std::max<size_t>(max_rollback, 1)),
      pool_(grammar_->grammar, false) {
  reset();
}

void GrammarMatcher::reset() {
  history_.assign(1, {});
  terminated_.assign(1, 0);
  pool_.initial_state(history_[0]);
  check_live_parses(history_[0].size());
}

void GrammarMatcher::check_live_parses(size_t n) const {
  if (n <= grammar_->max_live_parses) return;
  throw Error("structured output: the grammar is too ambiguous at output token " + std::to_string(num_accepted()) +
              ": " + std::to_string(n) + " live parses (the limit is " + std::to_string(grammar_->max_live_parses) +
              "); simplify it, e.g. no repeated group that can be empty (such as (x*){15}) and fewer overlapping "
              "alternatives");
}

bool GrammarMatcher::can_terminate() const {
  const auto& s = history_.back();
  return !s.empty() && s.front() == StackPool::kComplete;
}

bool GrammarMatcher::advance(const std::vector<int32_t>& from, std::string_view bytes,
                             std::vector<int32_t>& to) {
  scratch_a_ = from;
  for (char c : bytes) {
    pool_.step(scratch_a_, static_cast<uint8_t>(c), scratch_b_);
    if (scratch_b_.empty()) return false;
    check_live_parses(scratch_b_.size());
    std::swap(scratch_a_, scratch_b_);
  }
  to = scratch_a_;
  return true;
}

void GrammarMatcher::push(std::vector<int32_t> state, bool terminated) {
  history_.push_back(std::move(state));
  terminated_.push_back(terminated);
  if (history_.size() > 2 * max_rollback_ + 1) {
    const size_t drop = history_.size() - (max_rollback_ + 1);
    history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(drop));
    terminated_.erase(terminated_.begin(), terminated_.begin() + static_cast<std::ptrdiff_t>(drop));
    dropped_ += drop;
  }
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenVocabulary& v = *grammar_->vocab;
  if (is_terminated() || id < 0 || id >= v.rows()) return false;
  if (v.is_stop(id)) {
    if (!can_terminate()) return false;
    push(history_.back(), true);
    return true;
  }
  if (!v.is_grammar_token(id)) return false;  // special, empty or past the vocabulary
  std::vector<int32_t> next;
  if (!advance(history_.back(), v.bytes(id), next)) return false;
  push(std::move(next), false);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (is_terminated()) return false;
  std::vector<int32_t> next;
  if (!advance(history_.back(), bytes, next)) return false;
  push(std::move(next), false);
  return true;
}

void GrammarMatcher::rollback(size_t n) {
  if (n >= history_.size()) {
    throw Error("grammar matcher: cannot roll back " + std::to_string(n) + " tokens (" +
                std::to_string(history_.size() - 1) + " kept)");
  }
  history_.resize(history_.size() - n);
  terminated_.resize(terminated_.size() - n);
}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* words) {
  const size_t nwords = static_cast<size_t>(grammar_->vocab->mask_words());
  const auto& state = history_.back();
  if (!is_terminated()) {
    for (const auto& c : mask_cache_) {
      if (c.state == state) {
        std::memcpy(words, c.words.data(), nwords * sizeof(uint32_t));
        return;
      }
    }
  }
  compute_mask(words);
  if (is_terminated()) return;
  if (mask_cache_.size() < kMaskCacheSize) mask_cache_.emplace_back();
  CachedMask& slot = mask_cache_[mask_cache_next_++ % kMaskCacheSize];
  slot.state = state;
  slot.words.assign(words, words + nwords);
}

void GrammarMatcher::compute_mask(uint32_t* words) {
  const TokenVocabulary& v = *grammar_->vocab;
  const size_t nwords = static_cast<size_t>(v.mask_words());
  std::memset(words, 0, nwords * sizeof(uint32_t));
  const auto& state = history_.back();
  if (!is_terminated()) {
    // Distinct tops of the live stacks (merge_tops() triples: a position inside a counted
    // repetition body with its frame's remaining and missing iterations); their merged classes
    // come from the shared cache.
    const Grammar& g = grammar_->grammar;
    const auto clamp_limit = static_cast<int64_t>(v.max_token_bytes()) + 1;
    keys_.clear();
    for (int32_t s : state) {
      if (s < 2) continue;
      const int32_t p = pool_.top(s);
      std::array<int32_t, 3> key{p, 0, 0};
      const int32_t rep = g.repeat_of_body[static_cast<size_t>(g.elements[p].rule)];
      if (rep >= 0) {
        const Repeat& r = g.repeats[static_cast<size_t>(g.elements[rep].arg)];
        const int64_t k = pool_.count(pool_.parent(s));
        key[1] = static_cast<int32_t>(std::clamp<int64_t>(int64_t{r.max} - k, 0, clamp_limit));
        key[2] = static_cast<int32_t>(std::clamp<int64_t>(int64_t{r.min} - k, 0, clamp_limit));
      }
      keys_.push_back(key);
    }
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    tops_.clear();
    for (const auto& key : keys_) tops_.insert(tops_.end(), key.begin(), key.end());
    const TokenMaskCache& positions = *grammar_->position_tokens;
    const bool plain = keys_.size() == 1 && positions.at(keys_[0][0]).conditional.empty();
    const TopsMaskCache::Entry* merged =
        !keys_.empty() && !plain ? grammar_->tops_cache.find_or_build(tops_, positions, nwords) : nullptr;
    group_.clear();
    if (merged != nullptr) {
      std::memcpy(words, merged->accepted.data(), nwords * sizeof(uint32_t));
      group_ = merged->uncertain;
    } else {
      merge_tops(tops_, positions, nwords, words, group_);
    }
    check_uncertain(state, words);
  }
  if (is_terminated() || can_terminate()) {
    for (int32_t id : v.stop_ids()) words[id >> 5] |= 1u << (id & 31);
  }
}

void GrammarMatcher::check_uncertain(const std::vector<int32_t>& state, uint32_t* words) {
  // The uncertain tokens, each checked against the whole state by the exact parser, in trie order:
  // depth_states_[d] is the state after the first d bytes of the previous token, so a shared
  // prefix is stepped once (the Qwen3 vocabulary's 976k token bytes are 333k trie nodes).
  const TokenVocabulary& v = *grammar_->vocab;
  pending_.clear();  // trie ranks of the tokens still to check
  for (int32_t id : group_) {
    // Ids outside the trie (never allowed) cannot be uncertain; skipped all the same.
    if (!((words[id >> 5] >> (id & 31)) & 1) && v.trie_rank(id) >= 0) pending_.push_back(v.trie_rank(id));
  }
  std::sort(pending_.begin(), pending_.end());
  if (depth_states_.size() < static_cast<size_t>(v.max_token_bytes()) + 1) {
    depth_states_.resize(static_cast<size_t>(v.max_token_bytes()) + 1);
  }
  depth_states_[0] = state;
  const uint64_t budget = grammar_->max_mask_steps;
  uint64_t work = 0;
  size_t valid = 0;  // depth_states_[0, valid] hold the previous token's prefixes
  const std::string* prev = nullptr;
  for (int32_t rank : pending_) {
    const int32_t id = v.trie_tokens()[static_cast<size_t>(rank)];
    const std::string& bytes = v.bytes(id);
    size_t d = 0;
    if (prev != nullptr) {
      while (d < valid && d < bytes.size() && d < prev->size() && bytes[d] == (*prev)[d]) ++d;
    }
    while (d < bytes.size() && !depth_states_[d].empty()) {
      work += depth_states_[d].size();
      if (work > budget) {
        throw Error("structured output: the grammar is too ambiguous at output token " + std::to_string(num_accepted()) +
                    ": its token mask needs more than " + std::to_string(budget) +
                    " parser steps (the limit; " + std::to_string(state.size()) +
                    " live parses); simplify it, e.g. fewer overlapping alternatives or shorter counted repeats of wide "
                    "character classes");
      }
      pool_.step(depth_states_[d], static_cast<uint8_t>(bytes[d]), depth_states_[d + 1]);
      ++d;
    }
    valid = d;
    prev = &bytes;
    if (d == bytes.size() && !depth_states_[d].empty()) words[id >> 5] |= 1u << (id & 31);
  }
}

}  // namespace qs::constrained
