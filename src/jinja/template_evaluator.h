// Evaluator of parsed chat templates: scopes, statements and expressions, with the semantics of
// @huggingface/jinja (the reference the fixtures are generated with).
//
// Scoping follows the reference: `for` bodies run in one child scope shared by all iterations,
// `if` bodies run in the enclosing scope, `set` always writes the current scope, and macros run
// in a child of the *calling* scope. Output of a loop iteration that ends in break/continue is
// discarded, and a loop whose iterations all `continue` renders its else block, as in the
// reference.
#pragma once

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "jinja/template_ast.h"
#include "jinja/template_value.h"

namespace qs::chat {

/// One variable scope; lookups fall back to the parent scope.
class Environment {
 public:
  explicit Environment(Environment* parent = nullptr) : parent_(parent) {}

  /// The variable's value from this scope or the nearest ancestor; undefined if unset.
  Value lookup(const std::string& name) const;
  /// Sets the variable in this scope.
  void set(const std::string& name, Value value) { vars_[name] = std::move(value); }
  bool has_own(const std::string& name) const { return vars_.count(name) > 0; }

 private:
  Environment* parent_;
  std::unordered_map<std::string, Value> vars_;
};

class Evaluator {
 public:
  /// Renders `program` with `globals` as the outermost scope. Throws TemplateError.
  /// Namespaces are the only mutable values, so `{% set ns.x = ns %}` (or through a list or a
  /// second namespace) makes a reference cycle of shared pointers that would never be freed: when
  /// the render ends (returning or throwing), every namespace assigned into is emptied, which
  /// breaks any such cycle (found by chat_template_fuzz under LeakSanitizer).
  std::string render(const NodeList& program, Environment& globals);

  /// Evaluates an expression node. Errors without a line get the node's line.
  Value eval(const Node& node, Environment& env);
  /// Executes statements, appending their output to `out`.
  void exec_block(const NodeList& nodes, Environment& env, std::string& out);
  /// Evaluates call arguments: all positional (with *spread) first, then keyword arguments.
  CallArgs eval_args(const NodeList& args, Environment& env);

 private:
  void exec(const Node& node, Environment& env, std::string& out);
  void exec_statement(const Node& node, Environment& env, std::string& out);
  void exec_for(const Node& node, Environment& env, std::string& out);
  void exec_set(const Node& node, Environment& env);
  void define_macro(const Node& node, Environment& env);
  void exec_call_block(const Node& node, Environment& env, std::string& out);
  Value call_macro(const Node& params, const NodeList& body, const std::string& name,
                   const CallArgs& args, Environment& caller_env);

  Value eval_expression(const Node& node, Environment& env);
  Value eval_member(const Node& node, Environment& env);
  Value eval_slice(const Value& object, const Node& slice, Environment& env);
  Value eval_call(const Node& node, Environment& env);
  Value eval_unary(const Node& node, Environment& env);
  Value eval_binary(const Node& node, Environment& env);
  Value eval_dict(const Node& node, Environment& env);

  int macro_depth_ = 0;
  std::vector<Value> assigned_namespaces_;  // namespaces `set ns.attr = ...` wrote to (deduplicated)
  std::unordered_set<const Object*> assigned_seen_;
};

}  // namespace qs::chat
