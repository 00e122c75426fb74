// Builtins of the chat-template language: filters, tests, methods of strings/objects/arrays and
// the global functions. Behavior follows @huggingface/jinja where it implements a builtin;
// builtins it lacks (count, round, select, reject, escape, strip with chars, ...) follow Jinja2.
#pragma once

#include <optional>
#include <string>

#include "jinja/template_ast.h"
#include "jinja/template_evaluator.h"
#include "jinja/template_value.h"

namespace qs::chat {

/// Applies the filter described by `filter` (a kFilter node: name in text, arguments in items,
/// flag set when written with parentheses) to `operand`. Throws TemplateError for unknown
/// filters and unsupported operand types.
Value apply_filter(Evaluator& evaluator, const Node& filter, const Value& operand,
                   Environment& env);

/// Filters the reference does not implement (or not for this operand type), with Jinja2
/// semantics: count, round, select, reject, escape/e, default/d without parentheses, trim(chars),
/// first/last/list/reverse of strings, list of mappings, map(filter_name), string of anything.
/// nullopt if `filter` is none of these.
std::optional<Value> extension_filter(Evaluator& evaluator, const Node& filter,
                                      const Value& operand, Environment& env);

/// Runs the test `name` (`x is name(args)`). Throws TemplateError for unknown tests.
bool run_test(const std::string& name, const Value& operand, const CallArgs& args);

/// The builtin member `name` of `object` (a bound method or a property such as length), or
/// nullopt if it has none.
std::optional<Value> builtin_member(const Value& object, const std::string& name);

/// Python-style str.strip/lstrip/rstrip with an explicit character set (code points).
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right);

/// Declares true/false/none (and their title-case forms), namespace, range, raise_exception and
/// strftime_now in `globals`.
void install_globals(Environment& globals);

}  // namespace qs::chat
