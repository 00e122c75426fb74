#include "constrained/grammar_compiler.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <nlohmann/json.hpp>

#include "constrained/gbnf_parser.h"
#include "constrained/grammar_matcher.h"
#include "constrained/json_schema_grammar.h"
#include "constrained/regex_grammar.h"
#include "core/error.h"
#include "io/ordered_json_parser.h"

namespace qs::constrained {

GrammarSource GrammarSource::choices(const std::vector<std::string>& options) {
  return {GrammarKind::kChoices, nlohmann::json(options).dump()};
}

namespace {

/// Rejects JSON nested deeper than 4 x max_schema_depth levels before any recursive walk over it
/// (a schema level is at most a few JSON levels: {"properties": {"x": {...}}}).
void check_json_depth(const nlohmann::ordered_json& doc, int max_schema_depth) {
  const size_t limit = static_cast<size_t>(max_schema_depth) * 4 + 8;
  std::vector<std::pair<const nlohmann::ordered_json*, size_t>> todo{{&doc, 1}};
  while (!todo.empty()) {
    auto [v, depth] = todo.back();
    todo.pop_back();
    if (depth > limit) {
      throw Error("json_schema: document nested deeper than " + std::to_string(limit) + " levels");
    }
    if (v->is_structured()) {
      for (const auto& child : *v) todo.push_back({&child, depth + 1});
    }
  }
}

// See GrammarKind::kToolCalls.
int32_t add_tool_calls(GrammarBuilder& b, const std::string& text, const CompileLimits& limits) {
  nlohmann::ordered_json spec;
  try {
    spec = parse_ordered_json(text);  // linear in the text (a schema may list many properties)
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("tool_calls: not valid JSON: ") + e.what());
  }
  if (!spec.is_object() || !spec.contains("tools") || !spec["tools"].is_array() || spec["tools"].empty()) {
    throw Error("tool_calls: expected {\"tools\": [...]} with at least one tool");
  }
  std::vector<Sequence> calls;
  for (const auto& tool : spec["tools"]) {
    if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string()) {
      throw Error("tool_calls: every tool needs a string name");
    }
    const nlohmann::ordered_json parameters =
        tool.contains("parameters") && !tool["parameters"].is_null() ? tool["parameters"] : nlohmann::ordered_json::object();
    check_json_depth(parameters, limits.max_schema_depth);
    int32_t args = -1;
    try {
      args = add_json_schema(b, parameters, limits);
    } catch (const Error& e) {
      throw Error("tool " + tool["name"].get<std::string>() + ": " + e.what());
    }
    Sequence call = GrammarBuilder::literal("<tool_call>\n{\"name\": " + tool["name"].dump() + ", \"arguments\": ");
    call.push_back(Symbol::ref(args));
    append(call, GrammarBuilder::literal("}\n</tool_call>"));
    calls.push_back(std::move(call));
  }
  const Symbol one = b.alt(std::move(calls), "tool_call");
  Sequence root{one};
  if (spec.value("parallel", false)) {
    Sequence more = GrammarBuilder::literal("\n");
    more.push_back(one);
    root.push_back(b.star(std::move(more)));
  }
  return b.add_rule("tool_calls", {std::move(root)});
}

}  // namespace

Grammar parse_grammar_source(const GrammarSource& source, const CompileLimits& limits) {
  GrammarBuilder b(limits.max_symbols);
  int32_t root = -1;
  switch (source.kind) {
    case GrammarKind::kJsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = parse_ordered_json(source.text);
      } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("json_schema is not valid JSON: ") + e.what());
      }
      check_json_depth(schema, limits.max_schema_depth);
      root = add_json_schema(b, schema, limits);
      break;
    }
    case GrammarKind::kJsonObject:
      root = add_json_object(b);
      break;
    case GrammarKind::kRegex:
      root = add_regex(b, source.text, RegexMode::kRaw, limits.max_repeat);
      break;
    case GrammarKind::kChoices: {
      nlohmann::json list;
      try {
        list = nlohmann::json::parse(source.text);
      } catch (const nlohmann::json::exception& e) {
        throw Error(std::string("choices are not valid JSON: ") + e.what());
      }
      if (!list.is_array() || list.empty()) throw Error("choice: expected a non-empty list of strings");
      std::vector<Sequence> alts;
      for (const auto& c : list) {
        if (!c.is_string()) throw Error("choice: every choice must be a string");
        alts.push_back(GrammarBuilder::literal(c.get<std::string>()));
      }
      root = b.add_rule("choice", std::move(alts));
      break;
    }
    case GrammarKind::kGbnf:
      root = add_gbnf(b, source.text, limits.max_repeat);
      break;
    case GrammarKind::kToolCalls:
      root = add_tool_calls(b, source.text, limits);
      break;
  }
  return b.build(root);
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, CompileLimits limits,
                                 size_t cache_capacity, size_t cache_max_bytes)
    : vocab_(std::move(vocab)), limits_(limits), capacity_(cache_capacity), max_bytes_(cache_max_bytes) {
  slots_ = limits_.max_concurrent_compiles > 0
               ? limits_.max_concurrent_compiles
               : std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2));
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const GrammarSource& source) {
  std::string key = std::to_string(static_cast<int>(source.kind)) + ':' + source.text;
  {
    std::unique_lock lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->grammar;
    }
    // A miss: wait for a compile slot (a hit never waits).
    slot_freed_.wait(lock, [this] { return running_ < slots_; });
    ++running_;
    peak_running_ = std::max(peak_running_, running_);
  }
  struct Slot {
    GrammarCompiler& c;
    ~Slot() {
      {
        std::lock_guard lock(c.mu_);
        --c.running_;
      }
      c.slot_freed_.notify_one();
    }
  } slot{*this};
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::microseconds(static_cast<int64_t>(limits_.max_seconds * 1e6));
  auto cg = std::make_shared<CompiledGrammar>();
  cg->grammar = parse_grammar_source(source, limits_);
  cg->vocab = vocab_;
  cg->position_tokens = std::make_unique<TokenMaskCache>(cg->grammar, vocab_, deadline, limits_.max_parser_states);
  cg->max_mask_steps = limits_.max_mask_steps;
  cg->max_live_parses = limits_.max_live_parses;
  {
    // The first state and mask, built here (off the engine's thread) so that a grammar too
    // ambiguous for them is refused before it is queued; its shared caches then serve the first
    // request.
    GrammarMatcher first(cg);
    std::vector<uint32_t> words(static_cast<size_t>(first.mask_words()));
    first.fill_next_token_bitmask(words.data());
  }
  cg->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::shared_ptr<const CompiledGrammar> result = std::move(cg);
  if (capacity_ > 0) {
    std::lock_guard lock(mu_);
    if (index_.find(key) == index_.end()) {
      // The size at insertion is what is counted (and taken off on eviction): positions
      // classified on first use later are not counted.
      lru_.push_front({key, result, result->memory_bytes()});
      index_[std::move(key)] = lru_.begin();
      bytes_ += lru_.front().bytes;
      while (lru_.size() > capacity_ || (bytes_ > max_bytes_ && lru_.size() > 1)) {
        bytes_ -= lru_.back().bytes;
        index_.erase(lru_.back().key);
        lru_.pop_back();
      }
    }
  }
  return result;
}

size_t GrammarCompiler::cache_size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

int GrammarCompiler::peak_concurrent_compiles() const {
  std::lock_guard lock(mu_);
  return peak_running_;
}

size_t GrammarCompiler::cache_hits() const {
  std::lock_guard lock(mu_);
  return hits_;
}

}  // namespace qs::constrained
