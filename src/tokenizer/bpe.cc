#include "tokenizer/bpe.h"

#include <queue>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace qs::tokenizer_detail {
namespace {

constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = 1 << 16;

// A candidate merge of the symbol at `pos` with its right neighbour.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left_id;  // ids the two symbols had when queued; a change makes the entry stale
  int32_t right_id;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

BpeModel::BpeModel(const std::vector<std::string>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges) {
  token_ids_.reserve(vocab.size());
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (!vocab[id].empty()) token_ids_.emplace(vocab[id], static_cast<int32_t>(id));
  }
  for (unsigned b = 0; b < 256; ++b) {
    const auto id = find(bytes_to_byte_level(std::string(1, static_cast<char>(b))));
    byte_ids_[b] = id.value_or(-1);
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto left_id = find(left), right_id = find(right), merged_id = find(left + right);
    if (!left_id || !right_id || !merged_id) {
      throw Error("tokenizer: merge " + std::to_string(rank) + " '" + left + " " + right +
                  "' uses or produces a token missing from the vocabulary");
    }
    merges_[pair_key(*left_id, *right_id)] = Merge{static_cast<int32_t>(rank), *merged_id};
  }
}

std::optional<int32_t> BpeModel::find(std::string_view token) const {
  const auto it = token_ids_.find(token);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// Merges `symbols` (token ids) in place with a min-heap of candidate pairs: O(n log n).
void BpeModel::merge_word(std::vector<int32_t>& symbols) const {
  const auto n = static_cast<int32_t>(symbols.size());
  if (n < 2) return;
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    const int32_t right = symbols[next[pos]];
    if (const Merge* m = find_merge(symbols[pos], right)) {
      queue.push(Candidate{m->rank, pos, symbols[pos], right});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const int32_t right_pos = next[c.pos];
    if (!alive[c.pos] || right_pos < 0 || symbols[c.pos] != c.left_id ||
        symbols[right_pos] != c.right_id) {
      continue;  // stale: one of the two symbols has been merged since
    }
    symbols[c.pos] = find_merge(c.left_id, c.right_id)->id;
    alive[right_pos] = false;
    next[c.pos] = next[right_pos];
    if (next[c.pos] >= 0) prev[next[c.pos]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t kept = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) symbols[kept++] = symbols[i];
  symbols.resize(kept);
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  const bool cacheable = bytes.size() < kMaxCachedPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(bytes.size());
  for (const char c : bytes) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) symbols.push_back(id);
  }
  merge_word(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(bytes), std::move(symbols));
  }
}

}  // namespace qs::tokenizer_detail
