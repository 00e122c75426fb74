#include "server/structured_output.h"

#include <chrono>
#include <vector>

#include "core/error.h"
#include "server/api_error.h"
#include "server/json_field.h"

namespace qs {
namespace {

using json = nlohmann::ordered_json;
using constrained::GrammarSource;

using json_field::field;  // the member unless absent or null

// A schema given as an object or as a JSON string holding one (vLLM accepts both).
std::string schema_text(const json& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) return v.get<std::string>();
  throw invalid_param(param, param + " must be a JSON schema object");
}

std::string string_field(const json& v, const std::string& param) {
  if (!v.is_string()) throw invalid_param(param, param + " must be a string");
  return v.get<std::string>();
}

StructuredOutput choices(const json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) throw invalid_param(param, param + " must be a non-empty array of strings");
  std::vector<std::string> options;
  for (const auto& c : v) {
    if (!c.is_string()) throw invalid_param(param, param + " must be a non-empty array of strings");
    options.push_back(c.get<std::string>());
  }
  return {GrammarSource::choices(options), "choice", param};
}

std::optional<StructuredOutput> from_response_format(const json& rf) {
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
    throw invalid_param("response_format", "response_format must be an object with a string type");
  }
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return StructuredOutput{GrammarSource::json_object(), "json_object", "response_format"};
  if (type == "json_schema") {
    const json* js = field(rf, "json_schema");
    if (js == nullptr || !js->is_object()) {
      throw invalid_param("response_format.json_schema", "response_format.json_schema must be an object with a schema");
    }
    if (js->contains("name") && !(*js)["name"].is_string()) {
      throw invalid_param("response_format.json_schema.name", "response_format.json_schema.name must be a string");
    }
    if (js->contains("strict") && !(*js)["strict"].is_null() && !(*js)["strict"].is_boolean()) {
      throw invalid_param("response_format.json_schema.strict", "response_format.json_schema.strict must be a boolean");
    }
    const json* schema = field(*js, "schema");
    // OpenAI: an absent schema means any JSON object.
    if (schema == nullptr) return StructuredOutput{GrammarSource::json_object(), "json_schema", "response_format"};
    return StructuredOutput{GrammarSource::json_schema(schema_text(*schema, "response_format.json_schema.schema")),
                            "json_schema", "response_format.json_schema.schema"};
  }
  throw invalid_param("response_format.type", "response_format.type must be text, json_object or json_schema, got " + type);
}

std::optional<StructuredOutput> from_vllm(const json& so) {
  if (!so.is_object()) throw invalid_param("structured_outputs", "structured_outputs must be an object");
  std::optional<StructuredOutput> out;
  auto set = [&](StructuredOutput s) {
    if (out) throw invalid_param("structured_outputs", "structured_outputs takes one of json, regex, choice, grammar, json_object");
    out = std::move(s);
  };
  if (const json* v = field(so, "json")) set({GrammarSource::json_schema(schema_text(*v, "structured_outputs.json")), "json_schema", "structured_outputs.json"});
  if (const json* v = field(so, "regex")) set({GrammarSource::regex(string_field(*v, "structured_outputs.regex")), "regex", "structured_outputs.regex"});
  if (const json* v = field(so, "choice")) set(choices(*v, "structured_outputs.choice"));
  if (const json* v = field(so, "grammar")) set({GrammarSource::gbnf(string_field(*v, "structured_outputs.grammar")), "grammar", "structured_outputs.grammar"});
  if (const json* v = field(so, "json_object")) {
    if (!v->is_boolean()) throw invalid_param("structured_outputs.json_object", "structured_outputs.json_object must be a boolean");
    if (v->get<bool>()) set({GrammarSource::json_object(), "json_object", "structured_outputs.json_object"});
  }
  return out;
}

}  // namespace

LazyGrammarCompiler::LazyGrammarCompiler(const Tokenizer& tokenizer, int32_t rows, std::vector<int32_t> stop_ids)
    : tokenizer_(tokenizer), rows_(rows), stop_ids_(std::move(stop_ids)) {}

constrained::GrammarCompiler& LazyGrammarCompiler::get() {
  std::call_once(once_, [this] {
    compiler_ = std::make_unique<constrained::GrammarCompiler>(
        constrained::TokenVocabulary::from_tokenizer(tokenizer_, rows_, stop_ids_));
  });
  return *compiler_;
}

std::optional<StructuredOutput> parse_structured_output(const json& body) {
  std::optional<StructuredOutput> out;
  std::string first;
  auto take = [&](const char* name, std::optional<StructuredOutput> s) {
    if (!s) return;
    if (out) throw invalid_param(name, std::string(name) + " and " + first + " both constrain the output; send one");
    out = std::move(s);
    first = name;
  };
  if (const json* v = field(body, "response_format")) take("response_format", from_response_format(*v));
  if (const json* v = field(body, "structured_outputs")) take("structured_outputs", from_vllm(*v));
  if (const json* v = field(body, "guided_json")) take("guided_json", StructuredOutput{GrammarSource::json_schema(schema_text(*v, "guided_json")), "json_schema", "guided_json"});
  if (const json* v = field(body, "guided_regex")) take("guided_regex", StructuredOutput{GrammarSource::regex(string_field(*v, "guided_regex")), "regex", "guided_regex"});
  if (const json* v = field(body, "guided_choice")) take("guided_choice", choices(*v, "guided_choice"));
  if (const json* v = field(body, "guided_grammar")) take("guided_grammar", StructuredOutput{GrammarSource::gbnf(string_field(*v, "guided_grammar")), "grammar", "guided_grammar"});
  if (const json* v = field(body, "json_schema")) take("json_schema", StructuredOutput{GrammarSource::json_schema(schema_text(*v, "json_schema")), "json_schema", "json_schema"});
  if (const json* v = field(body, "grammar")) take("grammar", StructuredOutput{GrammarSource::gbnf(string_field(*v, "grammar")), "grammar", "grammar"});
  return out;
}

std::optional<StructuredOutput> tool_choice_grammar(const json& tools, const json& tool_choice, bool parallel_tool_calls) {
  if (tool_choice.is_null()) return std::nullopt;
  std::string forced;  // empty: any tool
  if (tool_choice.is_string()) {
    const std::string c = tool_choice.get<std::string>();
    if (c == "auto" || c == "none") return std::nullopt;
    if (c != "required") throw invalid_param("tool_choice", "tool_choice must be auto, none, required or a function object, got " + c);
  } else if (tool_choice.is_object()) {
    const json* fn = field(tool_choice, "function");
    if (json_field::string_or(tool_choice, "type", "") != "function" || fn == nullptr || !fn->is_object() || !fn->contains("name") ||
        !(*fn)["name"].is_string()) {
      throw invalid_param("tool_choice", "tool_choice object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    forced = (*fn)["name"].get<std::string>();
  } else {
    throw invalid_param("tool_choice", "tool_choice must be a string or an object");
  }
  if (!tools.is_array() || tools.empty()) throw invalid_param("tool_choice", "tool_choice forces a tool call, but no tools were given");
  json spec = {{"tools", json::array()}, {"parallel", parallel_tool_calls && forced.empty()}};
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string param = "tools[" + std::to_string(i) + "]";
    const json* fn = t.is_object() ? field(t, "function") : nullptr;
    if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
      throw invalid_param(param, param + " must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}");
    }
    const std::string name = (*fn)["name"].get<std::string>();
    if (!forced.empty() && name != forced) continue;
    json entry = {{"name", name}};
    if (const json* p = field(*fn, "parameters")) {
      if (!p->is_object()) throw invalid_param(param + ".function.parameters", param + ".function.parameters must be a JSON schema object");
      entry["parameters"] = *p;
    } else {
      entry["parameters"] = {{"type", "object"}};
    }
    spec["tools"].push_back(std::move(entry));
  }
  if (spec["tools"].empty()) throw invalid_param("tool_choice", "tool_choice names function " + forced + ", which is not in tools");
  return StructuredOutput{constrained::GrammarSource::tool_calls(spec.dump()), "tool", "tool_choice"};
}

std::shared_ptr<const constrained::CompiledGrammar> compile_structured_output(constrained::GrammarCompiler& compiler,
                                                                            const StructuredOutput& so,
                                                                            metrics::ServerMetrics* metrics) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const constrained::CompiledGrammar> grammar;
  try {
    grammar = compiler.compile(so.source);
  } catch (const Error& e) {
    throw invalid_param(so.param, std::string("invalid ") + so.param + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw invalid_param(so.param, std::string("invalid ") + so.param + ": " + e.what());
  }
  if (metrics != nullptr) {
    metrics->record_grammar_compile(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    metrics->record_structured_output(so.type);
  }
  return grammar;
}

}  // namespace qs
