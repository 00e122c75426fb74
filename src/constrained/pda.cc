#include "constrained/pda.h"

#include <algorithm>

namespace qs::constrained {

StackPool::StackPool(const Grammar& grammar, bool approximate)
    : g_(grammar), approximate_(approximate) {
  nodes_ = {{-1, kBottom}, {-1, kApproxBottom}};
  approx_ = {0, 1};
  mark_ = {0, 0};
}

int32_t StackPool::intern(int32_t pos, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) |
                       static_cast<uint32_t>(parent);
  auto [it, fresh] = index_.emplace(key, static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    nodes_.push_back({pos, parent});
    approx_.push_back(parent == kApproxBottom || (parent >= 0 && approx_[parent]));
    mark_.push_back(0);
  }
  return it->second;
}

void StackPool::expand(int32_t pos, int32_t parent) {
  const int32_t id = intern(pos, parent);
  if (mark_[id] == epoch_) return;
  mark_[id] = epoch_;
  const Element& e = g_.elements[pos];
  switch (e.kind) {
    case Element::Kind::kBytes:
      out_->push_back(id);
      return;
    case Element::Kind::kRule: {
      const bool tail = g_.elements[pos + 1].kind == Element::Kind::kEnd;
      const int32_t frame = tail ? parent : intern(pos + 1, parent);
      for (int32_t alt : g_.alternatives[e.arg]) expand(alt, frame);
      return;
    }
    case Element::Kind::kEnd:
      pop(parent, e.rule);
      return;
  }
}

void StackPool::pop(int32_t parent, int32_t rule) {
  if (parent >= 0) {
    expand(nodes_[parent].pos, nodes_[parent].parent);
  } else if (parent == kBottom) {
    const auto& ret = g_.return_positions[rule];
    if (approximate_ && ret.size() == 1 && !g_.can_end[rule]) {
      // The frame below is known: the rule has one return position and cannot end the grammar.
      expand(ret[0], kBottom);
      return;
    }
    out_->push_back(kComplete);
    if (approximate_) approximate_return(rule);
  } else {
    approximate_return(rule);
  }
}

void StackPool::approximate_return(int32_t rule) {
  if (g_.can_end[rule]) out_->push_back(kApproxComplete);
  for (int32_t q : g_.return_positions[rule]) expand(q, kApproxBottom);
}

void StackPool::finish(std::vector<int32_t>& out) {
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  out_ = nullptr;
}

void StackPool::initial_state(std::vector<int32_t>& out) {
  out.clear();
  out_ = &out;
  ++epoch_;
  for (int32_t alt : g_.alternatives[g_.root]) expand(alt, kBottom);
  finish(out);
}

void StackPool::step(const std::vector<int32_t>& in, uint8_t b, std::vector<int32_t>& out) {
  out.clear();
  out_ = &out;
  ++epoch_;
  for (int32_t s : in) {
    if (s < 2) continue;
    const Node n = nodes_[s];
    if (g_.sets[g_.elements[n.pos].arg].has(b)) expand(n.pos + 1, n.parent);
  }
  finish(out);
}

}  // namespace qs::constrained
