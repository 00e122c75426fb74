// Pushdown automaton over bytes for a Grammar: parser stacks as hash-consed persistent lists.
//
// A stack is a list of grammar positions: its top is the kBytes element the next input byte must
// match, the frames below are the positions to resume at when the current rule alternative ends
// (calls in tail position push no frame). A parser state is a sorted set of stack ids; a byte
// advances every stack whose top set contains it, then expands rule references and pops finished
// alternatives until every stack again has a kBytes top (the stack-set parsing of llama.cpp's
// GBNF engine, with shared stack tails as in a graph-structured stack; written from scratch).
//
// Stack id 0 (kComplete) is "the bottom frame was popped": in a matcher, the grammar is complete.
// In approximate mode (used by the token mask cache, which parses from a single position without
// knowing the real stack below it), popping past the bottom also continues at every position
// that may follow the finished rule anywhere in the grammar (Grammar::return_positions); stacks
// created that way are marked approximate, and id 1 (kApproxComplete) marks an approximate end.
// When the finished rule has exactly one return position and cannot end the grammar, the frame
// below is known and parsing continues there exactly.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "constrained/grammar.h"

namespace qs::constrained {

class StackPool {
 public:
  static constexpr int32_t kComplete = 0;
  static constexpr int32_t kApproxComplete = 1;

  StackPool(const Grammar& grammar, bool approximate);

  /// The start state of the grammar (stacks of every root alternative), sorted.
  void initial_state(std::vector<int32_t>& out);
  /// The stack holding only kBytes position `pos` above the context-free bottom.
  int32_t single(int32_t pos) { return intern(pos, kBottom); }
  /// Consumes byte `b`: `out` = sorted ids of the stacks reached from the stacks in `in`.
  void step(const std::vector<int32_t>& in, uint8_t b, std::vector<int32_t>& out);
  /// Top position of stack `s` (s >= 2).
  int32_t top(int32_t s) const { return nodes_[s].pos; }
  /// True for stacks that continue past the bottom through an approximated context.
  bool is_approx(int32_t s) const { return approx_[s] != 0; }
  size_t size() const { return nodes_.size(); }

 private:
  static constexpr int32_t kBottom = -1;
  static constexpr int32_t kApproxBottom = -2;
  struct Node {
    int32_t pos;
    int32_t parent;
  };

  int32_t intern(int32_t pos, int32_t parent);
  void expand(int32_t pos, int32_t parent);
  void pop(int32_t parent, int32_t rule);
  void approximate_return(int32_t rule);
  void finish(std::vector<int32_t>& out);

  const Grammar& g_;
  bool approximate_;
  std::vector<Node> nodes_;
  std::vector<uint8_t> approx_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 0;
  std::unordered_map<uint64_t, int32_t> index_;
  std::vector<int32_t>* out_ = nullptr;
};

}  // namespace qs::constrained
