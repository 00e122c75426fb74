// Exact-match response cache (issue 12, --response-cache-size): a deterministic request (greedy,
// temperature 0, or an explicit seed) seen before is answered from memory without touching the
// engine, as JSON or as SSE.
//
// The key is the served model, the route, the prompt's token ids after templating (so two
// conversations that template to the same prompt share an entry) and every other body field in
// canonical form (keys sorted), minus those that only shape the transport: "messages" / "prompt"
// (already in the token ids), "stream", "stream_options", "cache". Any other field change is a
// different key. Safe only on a batch-invariant backend (Backend::batch_invariant(): output does
// not depend on what else ran in the batch); serve refuses the option otherwise.
//
// Memory: an LRU bounded in bytes (keys + texts + token ids + logprobs, estimated); inserting
// evicts the least recently used entries until the total fits; an entry larger than the bound is
// not stored. Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/request.h"

namespace qs {

struct ChoiceState;

/// What a finished choice needs to be answered again.
struct CachedChoice {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  std::string stop_cause;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
};

struct CachedResponse {
  std::vector<CachedChoice> choices;
  /// Bytes this entry is charged (with its key): an estimate of its heap footprint.
  size_t bytes(const std::string& key) const;
};

class ResponseCache {
 public:
  /// `max_bytes` > 0.
  explicit ResponseCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  /// The entry for `key` (made most recently used), or null.
  std::shared_ptr<const CachedResponse> find(const std::string& key);
  /// Stores `value` under `key` (replacing an older entry), evicting least recently used entries
  /// until the total fits max_bytes; not stored when it alone exceeds max_bytes.
  void insert(const std::string& key, CachedResponse value);

  size_t bytes() const;
  size_t entries() const;
  size_t max_bytes() const { return max_bytes_; }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CachedResponse>>;
  void erase(std::list<Entry>::iterator it);  // mutex_ held

  const size_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

/// "cache" in the body: absent -> true; a boolean -> itself; else ApiError(400, param "cache").
bool cache_allowed_by(const nlohmann::ordered_json& body);

/// The cache key of a request (see the file comment), or "" when its output is not fully
/// determined: temperature > 0 without a seed (top_k 1 counts as greedy).
std::string response_cache_key(const nlohmann::ordered_json& body, const std::string& route, const std::string& model,
                               const std::vector<int32_t>& prompt_ids, float temperature, int32_t top_k, bool has_seed);

/// A cached copy of finished choices / choices rebuilt from one (done, no stream).
CachedResponse to_cached(const std::vector<ChoiceState>& choices);
std::vector<ChoiceState> from_cached(const CachedResponse& cached);

}  // namespace qs
