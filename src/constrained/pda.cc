#include "constrained/pda.h"

#include <algorithm>

namespace qs::constrained {

StackPool::StackPool(const Grammar& grammar, bool approximate)
    : g_(grammar), approximate_(approximate) {
  nodes_ = {{-1, kBottom, 0}, {-1, kApproxBottom, 0}};
  approx_ = {0, 1};
  cond_ = {{}, {}};
  mark_ = {0, 0};
}

int32_t StackPool::single(int32_t pos) {
  if (approximate_) {
    const int32_t rep = g_.repeat_of_body[static_cast<size_t>(g_.elements[pos].rule)];
    if (rep >= 0) return intern(pos, intern(rep, kRelativeBottom, 0));
  }
  return intern(pos, kBottom);
}

int32_t StackPool::intern(int32_t pos, int32_t parent, int32_t count) {
  // try_emplace: no node is allocated when the key is already there (the common case).
  auto [it, fresh] = index_.try_emplace(Key{pos, parent, count}, static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    nodes_.push_back({pos, parent, count});
    approx_.push_back(parent == kApproxBottom || (parent >= 0 && approx_[parent]));
    Condition c;
    if (pos == kExitMarker) {
      c = {2, count};
    } else if (parent == kRelativeBottom) {
      if (count > 0) c = {1, count};  // k + 0 <= max holds for every real frame
    } else if (parent >= 0) {
      c = cond_[parent];
    }
    cond_.push_back(c);
    mark_.push_back(0);
  }
  return it->second;
}

void StackPool::expand(int32_t pos, int32_t parent, int32_t count) {
  const int32_t id = intern(pos, parent, count);
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
    case Element::Kind::kRepeat:
      expand_repeat(pos, parent, count);
      return;
    case Element::Kind::kEnd:
      pop(parent, e.rule);
      return;
  }
}

void StackPool::expand_repeat(int32_t pos, int32_t parent, int32_t count) {
  const Repeat& r = g_.repeats[static_cast<size_t>(g_.elements[pos].arg)];
  // Another iteration: its frame holds the count once it completes. Relative frames (count
  // beyond an unknown k >= 0) stop where even k = 0 would pass max.
  if (count < r.max) {
    // Without an upper bound every count past min is alike: counting stops there (a state recurs).
    const bool saturate = r.max == Repeat::kUnbounded && parent != kRelativeBottom && count >= r.min;
    const int32_t frame = intern(pos, parent, saturate ? count : count + 1);
    for (int32_t alt : g_.alternatives[r.body]) expand(alt, frame);
  }
  if (parent == kRelativeBottom) {
    expand(pos + 1, intern(kExitMarker, kBottom, count));  // left after k + count iterations
  } else if (count >= r.min) {
    expand(pos + 1, parent);
  }
}

void StackPool::pop(int32_t parent, int32_t rule) {
  if (parent >= 0 && nodes_[parent].pos != kExitMarker) {
    expand(nodes_[parent].pos, nodes_[parent].parent, nodes_[parent].count);
  } else if (parent == kBottom || parent >= 0) {  // the bottom, or an exit marker (a bottom too)
    const auto& ret = g_.return_positions[rule];
    if (approximate_ && ret.size() == 1 && !g_.can_end[rule]) {
      // The frame below is known: the rule has one return position and cannot end the grammar.
      expand(ret[0], parent);
      return;
    }
    out_->push_back(parent == kBottom ? kComplete : parent);
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
    if (is_final(s)) continue;
    const Node n = nodes_[s];
    if (g_.sets[g_.elements[n.pos].arg].has(b)) expand(n.pos + 1, n.parent);
  }
  finish(out);
}

}  // namespace qs::constrained
