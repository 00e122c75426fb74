// Turns a constrained-decoding source into a shared CompiledGrammar, with compile limits and a
// cache keyed by the source text.
//
// Sources (GrammarSource::kind):
//   kJsonSchema  a JSON Schema document (see json_schema_grammar.h for the supported keywords);
//   kJsonObject  any JSON object (OpenAI response_format {"type": "json_object"}); text ignored;
//   kRegex       a regular expression the whole output must match (see regex_grammar.h);
//   kChoices     a JSON array of strings: the output is exactly one of them;
//   kGbnf        a GBNF grammar as llama.cpp's server takes it (see gbnf_parser.h), root "root".
//   kToolCalls   Qwen3 tool calls: text {"tools": [{"name": N, "parameters": SCHEMA}, ...],
//                "parallel": bool}; the output is `<tool_call>\n{"name": "N", "arguments": ARGS}
//                \n</tool_call>` with ARGS following N's parameter schema (each schema its own
//                document for $ref), one call, or with "parallel" one or more joined by "\n".
// Every error is a qs::Error whose message names the keyword, rule or limit at fault (fit for an
// HTTP 400 body).
#pragma once

#include <cstddef>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "constrained/compiled_grammar.h"

namespace qs::constrained {

enum class GrammarKind { kJsonSchema, kJsonObject, kRegex, kChoices, kGbnf, kToolCalls };

struct GrammarSource {
  GrammarKind kind;
  std::string text;

  static GrammarSource json_schema(std::string schema) { return {GrammarKind::kJsonSchema, std::move(schema)}; }
  static GrammarSource json_object() { return {GrammarKind::kJsonObject, ""}; }
  static GrammarSource regex(std::string pattern) { return {GrammarKind::kRegex, std::move(pattern)}; }
  static GrammarSource choices(const std::vector<std::string>& options);
  static GrammarSource gbnf(std::string grammar) { return {GrammarKind::kGbnf, std::move(grammar)}; }
  static GrammarSource tool_calls(std::string spec) { return {GrammarKind::kToolCalls, std::move(spec)}; }
};

struct CompileLimits {
  size_t max_symbols = 200'000;         // grammar size after expanding repetitions
  size_t max_parser_states = 200'000;   // distinct parser states while building the mask cache
  double max_seconds = 10.0;            // wall time of one compile
  int max_schema_depth = 64;            // nesting of schemas / $ref resolutions
  int64_t max_repeat = 10'000;          // a bound such as maxLength / maxItems / {m,n}
  // Parser work of one token mask: live parser stacks stepped over one byte, summed over the
  // tokens the position cache leaves uncertain (tokens sharing a prefix step it once). A mask
  // runs while the engine's batch waits, so an ambiguous grammar (e.g. a counted repeat of a
  // wide class followed by overlapping alternatives) must not stall every other request: past
  // this the mask throws (the request fails; at compile time, where the first mask is built, a
  // 400). About 20 ns per step on a Zen 4 core: 8M is ~0.2 s. Over the Qwen3 vocabulary `.{100}`
  // needs 3-4M (65-100 ms), a typical JSON schema none (no uncertain tokens); the fuzz-found
  // `[^-az]{15}(-[,-]90)c+.(.o0)c+.(.om|org)` needed ~1e9 (54 s per mask) before the limit.
  uint64_t max_mask_steps = 8'000'000;
  // Live parses (parser stacks) of one state. Each token the output takes steps all of them over
  // its bytes on the engine's thread, and every mask starts from them; a grammar whose parses
  // multiply (e.g. `([^a]*){15}`: 22,984 at the start) is refused at compile time when its first
  // state has more, and fails its request at the token where a state gets more. The e2e schemas
  // have at most tens; the fuzz-found regexes 1,521 and 22,984.
  size_t max_live_parses = 10'000;
  // Compiles (cache misses) running at once; more wait their turn. Compiles run on the HTTP
  // threads beside the engine, so a burst of large grammars must not take every core from the
  // batch that is running (12 at once on 2 cores held a plain request at 1.7 s instead of 0.06).
  // 0: half the hardware threads, at least 1.
  int max_concurrent_compiles = 0;
};

/// The byte-level grammar of a source, without a vocabulary (for tests and validation).
Grammar parse_grammar_source(const GrammarSource& source, const CompileLimits& limits = {});

class GrammarCompiler {
 public:
  /// `cache_capacity`: compiled grammars kept, `cache_max_bytes`: their total memory_bytes();
  /// the least recently used are evicted past either bound; capacity 0 disables caching.
  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, CompileLimits limits = {},
                           size_t cache_capacity = 256, size_t cache_max_bytes = size_t{512} << 20);

  /// Compiles or returns the cached grammar for `source`. Thread-safe. Throws qs::Error.
  std::shared_ptr<const CompiledGrammar> compile(const GrammarSource& source);

  const std::shared_ptr<const TokenVocabulary>& vocab() const { return vocab_; }
  size_t cache_size() const;
  size_t cache_hits() const;
  /// The most compiles that ever ran at once (<= the resolved max_concurrent_compiles).
  int peak_concurrent_compiles() const;

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  CompileLimits limits_;
  size_t capacity_;
  size_t max_bytes_;
  size_t bytes_ = 0;
  mutable std::mutex mu_;
  struct CacheEntry {
    std::string key;
    std::shared_ptr<const CompiledGrammar> grammar;
    size_t bytes;  // memory_bytes() when inserted
  };
  std::list<CacheEntry> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  size_t hits_ = 0;
  // Admission of compiles: at most slots_ at once (guarded by mu_, waited on with slot_freed_).
  int slots_ = 1;
  int running_ = 0;
  int peak_running_ = 0;
  std::condition_variable slot_freed_;
};

}  // namespace qs::constrained
