#include "constrained/grammar_matcher.h"

#include <algorithm>
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
    // Distinct top positions of the live stacks; their merged classes come from the shared cache.
    tops_.clear();
    for (int32_t s : state) {
      if (s >= 2) tops_.push_back(pool_.top(s));
    }
    std::sort(tops_.begin(), tops_.end());
    tops_.erase(std::unique(tops_.begin(), tops_.end()), tops_.end());
    const TokenMaskCache& positions = *grammar_->position_tokens;
    const TopsMaskCache::Entry* merged =
        tops_.size() > 1 ? grammar_->tops_cache.find_or_build(tops_, positions, nwords) : nullptr;
    group_.clear();
    if (merged != nullptr) {
      std::memcpy(words, merged->accepted.data(), nwords * sizeof(uint32_t));
      group_ = merged->uncertain;
    } else {
      for (int32_t p : tops_) {
        const PositionTokens& pt = positions.at(p);
        if (!pt.accepted_bits.empty()) {
          const uint32_t* src = pt.accepted_bits.data();
          for (size_t w = 0; w < nwords; ++w) words[w] |= src[w];
        }
        for (int32_t id : pt.accepted_ids) words[id >> 5] |= 1u << (id & 31);
        group_.insert(group_.end(), pt.uncertain.begin(), pt.uncertain.end());
      }
      std::sort(group_.begin(), group_.end());
      group_.erase(std::unique(group_.begin(), group_.end()), group_.end());
    }
    // Uncertain tokens, each checked once against the whole state by the exact parser.
    for (int32_t id : group_) {
      if ((words[id >> 5] >> (id & 31)) & 1) continue;
      scratch_a_ = state;
      bool ok = true;
      for (char c : v.bytes(id)) {
        pool_.step(scratch_a_, static_cast<uint8_t>(c), scratch_b_);
        if (scratch_b_.empty()) {
          ok = false;
          break;
        }
        std::swap(scratch_a_, scratch_b_);
      }
      if (ok) words[id >> 5] |= 1u << (id & 31);
    }
  }
  if (is_terminated() || can_terminate()) {
    for (int32_t id : v.stop_ids()) words[id >> 5] |= 1u << (id & 31);
  }
}

}  // namespace qs::constrained
