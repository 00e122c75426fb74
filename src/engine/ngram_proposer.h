// Speculative decoding's draft source without a draft model: n-gram prompt lookup (Saxena 2023,
// "Prompt Lookup Decoding"; vLLM's `ngram` method, llama.cpp's lookup decoding).
//
// Given a sequence's tokens so far (prompt + output), for n = ngram_max down to ngram_min: take
// the last n tokens as the key, find the most recent earlier occurrence of the key (ending before
// the sequence's last token), and propose the up to k tokens that followed it. The first n with
// a match wins. Where the continuation reaches the sequence's end it wraps around with the
// match's period, so a loop shorter than k still yields k drafts. The proposal is deterministic (a one-hot draft distribution), so verification
// uses the one-hot rejection step (sampling/rejection_sampler.h).
//
// Cost: O(len * n) comparisons per n tried, on the engine thread, per decoding sequence and
// step (a 4096-token context with n = 3: ~12k comparisons, microseconds next to a forward step).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace qs {

/// Drafts per step at most: a sequence's grammar matcher keeps 16 tokens of rollback
/// (engine/sequence.h), and verify steps beyond ~8 drafts cost more than they gain on a CPU.
inline constexpr int32_t kMaxDraftTokens = 16;

/// Speculative decoding settings shared by the engine and `generate`. Off unless draft_max >= 1
/// and a draft source is chosen: n-gram lookup (ngram_max >= 1; vLLM: method "ngram",
/// prompt_lookup_max / prompt_lookup_min, num_speculative_tokens) or a draft model (draft_model;
/// vLLM: method "draft_model"; its backend is given to the Engine / Generator, which then draft
/// with engine/draft_model_proposer.h instead of n-grams).
struct SpecDecodeOptions {
  int32_t ngram_max = 0;  // longest key (tokens); 0: no n-gram drafts
  int32_t ngram_min = 1;  // shortest key tried
  int32_t draft_max = 0;  // drafts proposed per step at most (k, <= kMaxDraftTokens); 0: off
  bool draft_model = false;  // drafts come from a draft model
  // Per sequence and step, k in [0, min(draft_max, room)] chosen from the sequence's acceptance
  // so far and the learned step costs (engine/draft_length.h); false: k = min(draft_max, room).
  bool adaptive = false;
  bool enabled() const { return draft_max >= 1 && (ngram_max >= 1 || draft_model); }
  /// Drafts a sequence may get this step: min(draft_max, room) within [0, kMaxDraftTokens], where
  /// `room` is the tokens it may still gain after this step's sampled one (max_tokens, context).
  int32_t drafts_for_room(int64_t room) const {
    return static_cast<int32_t>(std::clamp<int64_t>(std::min<int64_t>(draft_max, room), 0, kMaxDraftTokens));
  }
};

/// Writes `k` proposed tokens into `out` (cleared first; empty when no key matches or k < 1):
/// the tokens after the match, continued periodically past the sequence's end (a match at
/// distance d implies period d). Keys of ngram_max down to max(ngram_min, 1) tokens are tried, never longer than
/// tokens.size() - 1.
void propose_ngram(std::span<const int32_t> tokens, int32_t ngram_max, int32_t ngram_min, int32_t k,
                   std::vector<int32_t>& out);

}  // namespace qs
