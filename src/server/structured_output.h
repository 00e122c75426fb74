// Structured-output request fields -> a constrained-decoding grammar source, and its compile.
//
// Accepted (at most one per request; two is a 400):
//   response_format      {"type": "text"} (none), {"type": "json_object"},
//                        {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} (OpenAI)
//   structured_outputs   {"json": SCHEMA (object or string)} | {"regex": S} | {"choice": [S..]} |
//                        {"grammar": GBNF} | {"json_object": true} (vLLM)
//   guided_json / guided_regex / guided_choice / guided_grammar (vLLM's older names)
//   json_schema: SCHEMA, grammar: GBNF (llama-server)
// Tool calls (chat only): tool_choice "required" or {"type": "function", "function": {"name"}}
// forces Qwen3's <tool_call> format over the tools' parameter schemas (GrammarKind::kToolCalls);
// "auto" / "none" / absent leave the output free. A structured-output field together with a
// forced tool call is a 400 (param "tool_choice").
//
// Every error is an ApiError(400, type "BadRequestError") whose param names the field and whose
// message names the keyword / rule / limit at fault (from the grammar compiler).
#pragma once

#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "constrained/grammar_compiler.h"
#include "metrics/server_metrics.h"
#include "tokenizer/tokenizer.h"

namespace qs {

/// The server's one GrammarCompiler (and its grammar cache), built on first use: the vocabulary
/// trie of 151k tokens is not built for servers that never see a structured request.
/// `rows`: the model's logits rows (Backend::vocab_rows); `stop_ids`: the tokens that end a
/// generation (allowed only where a grammar may end). Thread-safe.
class LazyGrammarCompiler {
 public:
  LazyGrammarCompiler(const Tokenizer& tokenizer, int32_t rows, std::vector<int32_t> stop_ids);
  constrained::GrammarCompiler& get();

 private:
  const Tokenizer& tokenizer_;
  int32_t rows_;
  std::vector<int32_t> stop_ids_;
  std::once_flag once_;
  std::unique_ptr<constrained::GrammarCompiler> compiler_;
};

struct StructuredOutput {
  constrained::GrammarSource source;
  std::string type;   // metric label: json_schema, json_object, regex, choice, grammar, tool
  std::string param;  // the request field it came from (for 400s)
};

/// The structured-output field of a chat or completion body, if any. Throws ApiError(400) for a
/// wrong shape or more than one such field.
std::optional<StructuredOutput> parse_structured_output(const nlohmann::ordered_json& body);

/// The forced tool-call grammar for `tool_choice` ("required" or a named function) over `tools`
/// (an OpenAI tools array, already checked to be an array or null); nullopt for auto / none /
/// absent. Throws ApiError(400, param "tool_choice") for an invalid tool_choice, a named function
/// that is not in tools, or required/named without tools.
std::optional<StructuredOutput> tool_choice_grammar(const nlohmann::ordered_json& tools,
                                                    const nlohmann::ordered_json& tool_choice,
                                                    bool parallel_tool_calls);

/// Compiles `so` (cached by the compiler), records the compile time and the request type in
/// `metrics` (when given). Throws ApiError(400, param so.param) naming the compiler's error.
std::shared_ptr<const constrained::CompiledGrammar> compile_structured_output(constrained::GrammarCompiler& compiler,
                                                                            const StructuredOutput& so,
                                                                            metrics::ServerMetrics* metrics);

}  // namespace qs
