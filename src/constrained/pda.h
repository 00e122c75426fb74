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
//
// Counted repetitions (Grammar::repeats): the frame of a kRepeat element carries `count`, the
// iterations completed once the body alternative above it ends; another iteration may start while
// count < max, the element may be left once count >= min. In approximate mode a position inside a
// repetition body is parsed above a relative frame: the real count k below it is unknown, so the
// frame counts from 0 = k, every iteration may start and the element may always be left, and each
// stack carries the condition on k under which it is real (Condition): a stack inside iteration
// k + s needs k + s <= max; a stack past the element, left after k + e iterations, needs
// min <= k + e <= max (it stands on an exit marker node, a bottom that remembers e).
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
  /// The stack holding only kBytes position `pos` above the context-free bottom (approximate
  /// mode, a position inside a counted repetition body: above a relative frame of that repeat).
  int32_t single(int32_t pos);
  /// Consumes byte `b`: `out` = sorted ids of the stacks reached from the stacks in `in`.
  void step(const std::vector<int32_t>& in, uint8_t b, std::vector<int32_t>& out);
  /// Top position of stack `s` (s >= 2).
  int32_t top(int32_t s) const { return nodes_[s].pos; }
  /// The frame below the top of stack `s`, and its iteration count (a kRepeat frame's count).
  int32_t parent(int32_t s) const { return nodes_[s].parent; }
  int32_t count(int32_t s) const { return nodes_[s].count; }
  /// Approximate mode: what a stack (or an exit marker) needs from the unknown count k of the
  /// relative frame it stands on. kind 0: nothing; 1 (stay): k + value <= max; 2 (exit):
  /// min <= k + value <= max of that repetition.
  struct Condition {
    uint8_t kind = 0;
    int32_t value = 0;
  };
  Condition condition(int32_t s) const { return cond_[s]; }
  /// True for ids that are not stacks with a kBytes top: kComplete, kApproxComplete, exit markers
  /// (a completion under an exit condition).
  bool is_final(int32_t s) const { return s < 2 || nodes_[s].pos < 0; }
  /// True for stacks that continue past the bottom through an approximated context.
  bool is_approx(int32_t s) const { return approx_[s] != 0; }
  size_t size() const { return nodes_.size(); }

 private:
  static constexpr int32_t kBottom = -1;
  static constexpr int32_t kApproxBottom = -2;
  static constexpr int32_t kRelativeBottom = -3;  // below a relative kRepeat frame
  static constexpr int32_t kExitMarker = -4;      // Node::pos of an exit marker (count = e)
  struct Node {
    int32_t pos;
    int32_t parent;
    int32_t count;
  };
  struct Key {
    int32_t pos, parent, count;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(k.pos)) << 32) | static_cast<uint32_t>(k.parent);
      h ^= static_cast<uint64_t>(static_cast<uint32_t>(k.count)) * 0x9E3779B97F4A7C15ULL;
      return static_cast<size_t>(h * 0xBF58476D1CE4E5B9ULL ^ (h >> 31));
    }
  };

  int32_t intern(int32_t pos, int32_t parent, int32_t count = 0);
  void expand(int32_t pos, int32_t parent, int32_t count = 0);
  void expand_repeat(int32_t pos, int32_t parent, int32_t count);
  void pop(int32_t parent, int32_t rule);
  void approximate_return(int32_t rule);
  void finish(std::vector<int32_t>& out);

  const Grammar& g_;
  bool approximate_;
  std::vector<Node> nodes_;
  std::vector<uint8_t> approx_;
  std::vector<Condition> cond_;
  std::vector<uint32_t> mark_;
  uint32_t epoch_ = 0;
  std::unordered_map<Key, int32_t, KeyHash> index_;
  std::vector<int32_t>* out_ = nullptr;
};

}  // namespace qs::constrained
