#include "server/response_cache.h"

#include "server/api_error.h"
#include "server/response_builder.h"

namespace qs {

size_t CachedResponse::bytes(const std::string& key) const {
  size_t n = sizeof(CachedResponse) + key.size() + 64;  // 64: list / map node overhead
  for (const CachedChoice& c : choices) {
    n += sizeof(CachedChoice) + c.text.size() + c.finish_reason.size() + c.stop_cause.size() +
         c.tokens.size() * sizeof(int32_t);
    for (const TokenLogprob& lp : c.logprobs) n += sizeof(TokenLogprob) + lp.top.size() * sizeof(lp.top[0]);
  }
  return n;
}

std::shared_ptr<const CachedResponse> ResponseCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ResponseCache::erase(std::list<Entry>::iterator it) {
  bytes_ -= it->second->bytes(it->first);
  index_.erase(it->first);
  lru_.erase(it);
}

void ResponseCache::insert(const std::string& key, CachedResponse value) {
  const size_t size = value.bytes(key);
  if (size > max_bytes_) return;
  auto entry = std::make_shared<const CachedResponse>(std::move(value));
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) erase(it->second);
  while (bytes_ + size > max_bytes_ && !lru_.empty()) erase(std::prev(lru_.end()));
  lru_.emplace_front(key, std::move(entry));
  index_[key] = lru_.begin();
  bytes_ += size;
}

size_t ResponseCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

size_t ResponseCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

bool cache_allowed_by(const nlohmann::ordered_json& body) {
  if (!body.is_object() || !body.contains("cache")) return true;
  const auto& v = body["cache"];
  if (!v.is_boolean()) throw invalid_param("cache", "cache must be a boolean, got " + v.dump());
  return v.get<bool>();
}

std::string response_cache_key(const nlohmann::ordered_json& body, const std::string& route, const std::string& model,
                               const std::vector<int32_t>& prompt_ids, float temperature, int32_t top_k, bool has_seed) {
  const bool deterministic = temperature == 0.0f || top_k == 1 || has_seed;
  if (!deterministic) return {};
  nlohmann::json rest = nlohmann::json::object();  // std::map keys: sorted, canonical
  for (const auto& [name, value] : body.items()) {
    if (name == "messages" || name == "prompt" || name == "stream" || name == "stream_options" || name == "cache" ||
        name == "model") {
      continue;
    }
    rest[name] = nlohmann::json::parse(value.dump());
  }
  std::string key = route + '\n' + model + '\n';
  for (int32_t id : prompt_ids) key += std::to_string(id) + ',';
  key += '\n' + rest.dump();
  return key;
}

CachedResponse to_cached(const std::vector<ChoiceState>& choices) {
  CachedResponse r;
  for (const ChoiceState& c : choices) {
    r.choices.push_back({c.text, c.tokens, c.logprobs, c.finish_reason, c.stop_cause, c.prompt_tokens,
                         c.completion_tokens, c.cached_tokens});
  }
  return r;
}

std::vector<ChoiceState> from_cached(const CachedResponse& cached) {
  std::vector<ChoiceState> out;
  for (const CachedChoice& c : cached.choices) {
    ChoiceState s;
    s.text = c.text;
    s.tokens = c.tokens;
    s.logprobs = c.logprobs;
    s.finish_reason = c.finish_reason;
    s.stop_cause = c.stop_cause;
    s.prompt_tokens = c.prompt_tokens;
    s.completion_tokens = c.completion_tokens;
    s.cached_tokens = c.cached_tokens;
    s.admitted = true;
    s.done = true;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace qs
