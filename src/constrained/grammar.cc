#include "constrained/grammar.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace qs::constrained {

void append(Sequence& seq, const Sequence& more) { seq.insert(seq.end(), more.begin(), more.end()); }

namespace {

/// Rules made only of byte sets (no references, no empty alternative), e.g. character classes.
bool is_terminal_rule(const std::vector<Sequence>& alts) {
  if (alts.empty() || alts.size() > 64) return false;
  for (const auto& a : alts) {
    if (a.empty()) return false;
    for (const auto& s : a) {
      if (s.rule >= 0) return false;
    }
  }
  return true;
}

}  // namespace

int32_t GrammarBuilder::declare(std::string name) {
  names_.push_back(std::move(name));
  rules_.emplace_back();
  defined_.push_back(false);
  return static_cast<int32_t>(names_.size() - 1);
}

void GrammarBuilder::define(int32_t rule, std::vector<Sequence> alternatives) {
  if (defined_[rule]) throw Error("grammar rule '" + names_[rule] + "' is defined twice");
  for (const auto& a : alternatives) symbols_ += a.size() + 1;
  if (symbols_ > max_symbols_) {
    throw Error("grammar too large: more than " + std::to_string(max_symbols_) +
                " symbols (compile limit)");
  }
  rules_[rule] = std::move(alternatives);
  defined_[rule] = true;
}

Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence s;
  s.reserve(text.size());
  for (char c : text) s.push_back(Symbol::byte(static_cast<uint8_t>(c)));
  return s;
}

Symbol GrammarBuilder::alt(std::vector<Sequence> alternatives, const char* name) {
  return Symbol::ref(add_rule(name, std::move(alternatives)));
}

Symbol GrammarBuilder::opt(Sequence body) { return alt({std::move(body), {}}, "opt"); }

Symbol GrammarBuilder::star(Sequence body) {
  const int32_t r = declare("star");
  body.push_back(Symbol::ref(r));
  define(r, {std::move(body), {}});
  return Symbol::ref(r);
}

Symbol GrammarBuilder::plus(Sequence body) {
  Sequence first = body;
  first.push_back(star(std::move(body)));
  return alt({std::move(first)}, "plus");
}

Sequence GrammarBuilder::repeat(const Sequence& body, int64_t min, int64_t max, int64_t max_count) {
  if (min > max_count || max > max_count) {
    throw Error("repetition count " + std::to_string(std::max(min, max)) + " exceeds the limit " +
                std::to_string(max_count));
  }
  // One character repeated up to a large bound: a counted node over a private copy of the body
  // (its positions then belong to this node only; see Repeat). Nodes are shared by equal bodies
  // and bounds.
  const bool one_char = body.size() == 1 && body[0].repeat < 0 &&
                        (body[0].rule < 0 ? !body[0].bytes.empty()
                                          : defined_[body[0].rule] && is_terminal_rule(rules_[body[0].rule]));
  if (one_char && (max < 0 ? min : max) > kCountedFrom) {
    const auto key = std::make_tuple(body[0].rule, body[0].rule < 0 ? body[0].bytes.words : std::array<uint64_t, 4>{},
                                     min, max);
    auto it = counted_.find(key);
    if (it != counted_.end()) return {it->second};
    const int32_t copy =
        add_rule("repeat_body", body[0].rule >= 0 ? rules_[body[0].rule] : std::vector<Sequence>{{body[0]}});
    Symbol node = Symbol::ref(copy);
    node.repeat = static_cast<int32_t>(repeat_bounds_.size());
    repeat_bounds_.push_back({static_cast<int32_t>(min), max < 0 ? Repeat::kUnbounded : static_cast<int32_t>(max)});
    const Symbol wrapper = alt({{node}}, "repeat");
    counted_.emplace(key, wrapper);
    return {wrapper};
  }
  Sequence out;
  for (int64_t i = 0; i < min; ++i) append(out, body);
  if (max < 0) {
    out.push_back(star(body));
  } else if (max > min) {
    // o_1 ::= body | ""; o_k ::= body o_{k-1} | ""  (unambiguous: at most max-min more copies).
    // Chains over one rule are shared: o_k of a shorter bound is a suffix of a longer one.
    std::vector<Symbol> local;
    std::vector<Symbol>& chain =
        (body.size() == 1 && body[0].rule >= 0) ? opt_chains_[body[0].rule] : local;
    while (static_cast<int64_t>(chain.size()) < max - min) {
      Sequence s = body;
      if (!chain.empty()) s.push_back(chain.back());
      chain.push_back(opt(std::move(s)));
    }
    out.push_back(chain[static_cast<size_t>(max - min - 1)]);
  }
  return out;
}

namespace {

/// `bounds`: GrammarBuilder's counted-repetition bounds (a repetition with min 0 is productive
/// even when its body is not).
bool alt_productive(const Sequence& a, const std::vector<bool>& productive,
                    const std::vector<std::pair<int32_t, int32_t>>& bounds) {
  for (const auto& s : a) {
    if (s.rule >= 0 && s.repeat >= 0 && bounds[static_cast<size_t>(s.repeat)].first == 0) continue;
    if (s.rule >= 0 ? !productive[s.rule] : s.bytes.empty()) return false;
  }
  return true;
}

}  // namespace

namespace {

/// Inlines references to terminal rules (one alternative per combination, up to 256 per
/// alternative), so that a character inside a loop does not end a rule: the mask cache then
/// classifies tokens that span several characters exactly instead of as uncertain.
std::vector<std::vector<Sequence>> inline_terminal_rules(const std::vector<std::vector<Sequence>>& rules,
                                                         const std::vector<bool>& defined) {
  std::vector<bool> terminal(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) terminal[r] = defined[r] && is_terminal_rule(rules[r]);
  std::vector<std::vector<Sequence>> out(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const auto& a : rules[r]) {
      size_t product = 1;
      for (const auto& s : a) {
        if (s.rule >= 0 && s.repeat < 0 && terminal[s.rule]) product *= rules[s.rule].size();
        if (product > 256) break;
      }
      if (product == 1 || product > 256) {
        out[r].push_back(a);
        continue;
      }
      std::vector<Sequence> partial{Sequence{}};
      for (const auto& s : a) {
        if (s.rule >= 0 && s.repeat < 0 && terminal[s.rule]) {
          std::vector<Sequence> next;
          for (const auto& p : partial) {
            for (const auto& t : rules[s.rule]) {
              Sequence q = p;
              append(q, t);
              next.push_back(std::move(q));
            }
          }
          partial = std::move(next);
        } else {
          for (auto& p : partial) p.push_back(s);
        }
      }
      for (auto& p : partial) out[r].push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace

Grammar GrammarBuilder::build(int32_t root) const {
  const size_t n = rules_.size();
  const std::vector<std::vector<Sequence>> rules_ = inline_terminal_rules(this->rules_, defined_);
  // Undefined rules reachable from root.
  std::vector<bool> reach(n, false);
  std::vector<int32_t> work{root};
  reach[root] = true;
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    if (!defined_[r]) throw Error("grammar rule '" + names_[r] + "' is not defined");
    for (const auto& a : rules_[r]) {
      for (const auto& s : a) {
        if (s.rule >= 0 && !reach[s.rule]) {
          reach[s.rule] = true;
          work.push_back(s.rule);
        }
      }
    }
  }
  // Productive rules (least fixpoint).
  std::vector<bool> productive(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (productive[r] || !reach[r]) continue;
      for (const auto& a : rules_[r]) {
        if (alt_productive(a, productive, repeat_bounds_)) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  if (!productive[root]) {
    throw Error("grammar '" + names_[root] + "' is unsatisfiable: it matches no finite string");
  }
  // Keep productive alternatives; renumber the rules reachable through them.
  std::vector<int32_t> id(n, -1);
  std::vector<int32_t> order{root};
  id[root] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for (const auto& a : rules_[order[i]]) {
      if (!alt_productive(a, productive, repeat_bounds_)) continue;
      for (const auto& s : a) {
        if (s.rule >= 0 && id[s.rule] < 0) {
          id[s.rule] = static_cast<int32_t>(order.size());
          order.push_back(s.rule);
        }
      }
    }
  }
  const size_t m = order.size();
  // Nullable rules and left recursion (a rule reachable from itself through nullable prefixes).
  std::vector<bool> nullable(m, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < m; ++i) {
      if (nullable[i]) continue;
      for (const auto& a : rules_[order[i]]) {
        if (!alt_productive(a, productive, repeat_bounds_)) continue;
        bool all = true;
        for (const auto& s : a) {
          all = all && s.rule >= 0 &&
                (s.repeat >= 0 ? repeat_bounds_[static_cast<size_t>(s.repeat)].first == 0 : nullable[id[s.rule]]);
        }
        if (all) {
          nullable[i] = changed = true;
          break;
        }
      }
    }
  }
  // Left edges A -> B: B can start A after a nullable prefix. A cycle of left edges loops the
  // parser forever only if it pushes a frame, i.e. contains a call that is not in tail position
  // (tail calls keep the frame and the parser's visited marks end the cycle): such a cycle, a
  // non-tail left edge inside one strongly connected component, is left recursion.
  std::vector<std::vector<std::pair<int32_t, bool>>> left(m);  // (target, tail call)
  for (size_t i = 0; i < m; ++i) {
    for (const auto& a : rules_[order[i]]) {
      if (!alt_productive(a, productive, repeat_bounds_)) continue;
      for (size_t k = 0; k < a.size(); ++k) {
        if (a[k].rule < 0) break;
        if (a[k].repeat >= 0) {  // a terminal body: no edge (it calls no rule)
          if (repeat_bounds_[static_cast<size_t>(a[k].repeat)].first == 0) continue;
          break;
        }
        left[i].push_back({id[a[k].rule], k + 1 == a.size()});
        if (!nullable[id[a[k].rule]]) break;
      }
    }
  }
  // Kosaraju: finish order on the graph, then components on the reversed graph.
  std::vector<int32_t> finish;
  std::vector<uint8_t> visited(m, 0);
  for (size_t start = 0; start < m; ++start) {
    if (visited[start]) continue;
    std::vector<std::pair<int32_t, size_t>> stack{{static_cast<int32_t>(start), 0}};
    visited[start] = 1;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      if (next < left[r].size()) {
        const int32_t t = left[r][next++].first;
        if (!visited[t]) {
          visited[t] = 1;
          stack.push_back({t, 0});
        }
      } else {
        finish.push_back(r);
        stack.pop_back();
      }
    }
  }
  std::vector<std::vector<int32_t>> reverse(m);
  for (size_t i = 0; i < m; ++i) {
    for (const auto& [t, tail] : left[i]) reverse[t].push_back(static_cast<int32_t>(i));
  }
  std::vector<int32_t> component(m, -1);
  for (size_t k = finish.size(); k-- > 0;) {
    const int32_t root_rule = finish[k];
    if (component[root_rule] >= 0) continue;
    std::vector<int32_t> todo{root_rule};
    component[root_rule] = root_rule;
    while (!todo.empty()) {
      const int32_t r = todo.back();
      todo.pop_back();
      for (int32_t p : reverse[r]) {
        if (component[p] < 0) {
          component[p] = root_rule;
          todo.push_back(p);
        }
      }
    }
  }
  for (size_t i = 0; i < m; ++i) {
    for (const auto& [t, tail] : left[i]) {
      if (!tail && component[t] == component[i]) {
        throw Error("grammar rule '" + names_[order[t]] + "' is left-recursive");
      }
    }
  }
  // Flatten.
  Grammar g;
  g.root = 0;
  g.alternatives.resize(m);
  g.rule_names.resize(m);
  g.repeat_of_body.assign(m, -1);
  std::map<std::array<uint64_t, 4>, int32_t> set_ids;
  for (size_t i = 0; i < m; ++i) {
    g.rule_names[i] = names_[order[i]];
    for (const auto& a : rules_[order[i]]) {
      if (!alt_productive(a, productive, repeat_bounds_)) continue;
      g.alternatives[i].push_back(static_cast<int32_t>(g.elements.size()));
      for (const auto& s : a) {
        if (s.repeat >= 0) {
          const auto [lo, hi] = repeat_bounds_[static_cast<size_t>(s.repeat)];
          const int32_t body = id[s.rule];
          if (g.repeat_of_body[static_cast<size_t>(body)] >= 0) {
            throw Error("grammar rule '" + names_[s.rule] + "' is the body of two counted repetitions");
          }
          g.repeat_of_body[static_cast<size_t>(body)] = static_cast<int32_t>(g.elements.size());
          g.elements.push_back({Element::Kind::kRepeat, static_cast<int32_t>(g.repeats.size()), static_cast<int32_t>(i)});
          g.repeats.push_back({body, lo, hi});
        } else if (s.rule >= 0) {
          g.elements.push_back({Element::Kind::kRule, id[s.rule], static_cast<int32_t>(i)});
        } else {
          auto [it, fresh] = set_ids.emplace(s.bytes.words, static_cast<int32_t>(g.sets.size()));
          if (fresh) g.sets.push_back(s.bytes);
          g.elements.push_back({Element::Kind::kBytes, it->second, static_cast<int32_t>(i)});
        }
      }
      g.elements.push_back({Element::Kind::kEnd, -1, static_cast<int32_t>(i)});
    }
  }
  // Return positions and can_end through tail-call chains.
  std::vector<std::vector<int32_t>> direct(m), tail_callers(m);
  for (size_t p = 0; p < g.elements.size(); ++p) {
    const Element& e = g.elements[p];
    if (e.kind != Element::Kind::kRule) continue;
    if (g.elements[p + 1].kind == Element::Kind::kEnd) {
      tail_callers[e.arg].push_back(e.rule);
    } else {
      direct[e.arg].push_back(static_cast<int32_t>(p + 1));
    }
  }
  g.return_positions.resize(m);
  g.can_end.assign(m, 0);
  std::vector<int32_t> seen(m, -1);
  for (size_t r = 0; r < m; ++r) {
    std::vector<int32_t> todo{static_cast<int32_t>(r)};
    seen[r] = static_cast<int32_t>(r);
    auto& out = g.return_positions[r];
    while (!todo.empty()) {
      const int32_t t = todo.back();
      todo.pop_back();
      if (t == g.root) g.can_end[r] = 1;
      out.insert(out.end(), direct[t].begin(), direct[t].end());
      for (int32_t c : tail_callers[t]) {
        if (seen[c] != static_cast<int32_t>(r)) {
          seen[c] = static_cast<int32_t>(r);
          todo.push_back(c);
        }
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return g;
}

}  // namespace qs::constrained
