// A grammar compiled for one vocabulary: immutable after construction and shared read-only by
// every matcher (one per sequence) on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrained/grammar.h"
#include "constrained/token_mask_cache.h"
#include "constrained/token_vocabulary.h"

namespace qs::constrained {

/// Merges the token classes of parser-stack tops. `tops`: sorted, distinct triples (position,
/// r, m); for a position inside a counted repetition body r = max - k and m = min - k of the
/// frame's count k, clamped to [0, max_token_bytes + 1] (ConditionalToken::holds gives the same
/// answer for every unclamped value), else 0 0. `accepted` (`words` zero words) gets the accepted
/// and holding conditional tokens; `uncertain` the uncertain ones not accepted, sorted, distinct.
void merge_tops(const std::vector<int32_t>& tops, const TokenMaskCache& positions, size_t words,
                uint32_t* accepted, std::vector<int32_t>& uncertain);

/// The merged token classes of a set of parser-stack tops (several positions are live at once,
/// e.g. every alternative of a character class, or one repetition body position at several
/// counts): accepted tokens as one bitmask and the uncertain tokens (sorted, not already
/// accepted). Shared by all matchers of a grammar; filled on first use, never evicted, at most
/// `max_entries` entries (then computed per call).
class TopsMaskCache {
 public:
  struct Entry {
    std::vector<uint32_t> accepted;  // mask words
    std::vector<int32_t> uncertain;
  };
  explicit TopsMaskCache(size_t max_entries = 1024) : max_entries_(max_entries) {}

  /// The entry for the tops key of merge_tops(); nullptr when the cache is full and the key
  /// absent (the caller then merges itself). Thread-safe.
  const Entry* find_or_build(const std::vector<int32_t>& tops, const TokenMaskCache& positions, size_t words);

 private:
  struct Hash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 1469598103934665603ULL;
      for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ULL;
      return h;
    }
  };
  size_t max_entries_;
  std::shared_mutex mu_;
  std::unordered_map<std::vector<int32_t>, std::unique_ptr<const Entry>, Hash> entries_;
};

struct CompiledGrammar {
  Grammar grammar;
  std::shared_ptr<const TokenVocabulary> vocab;
  std::unique_ptr<TokenMaskCache> position_tokens;  // over `grammar`; positions classified
                                                    // on first use are filled by matchers
  double compile_ms = 0;                            // wall time of parse + mask cache build
  uint64_t max_mask_steps = UINT64_MAX;             // CompileLimits::max_mask_steps
  size_t max_live_parses = SIZE_MAX;                // CompileLimits::max_live_parses
  mutable TopsMaskCache tops_cache;                 // thread-safe; filled by matchers

  /// Grammar elements plus the token classes built so far (grows as matchers fill positions).
  size_t memory_bytes() const {
    return grammar.elements.size() * sizeof(Element) + (position_tokens ? position_tokens->memory_bytes() : 0);
  }
};

}  // namespace qs::constrained
