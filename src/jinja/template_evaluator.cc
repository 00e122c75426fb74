// Statement execution: output, if, for, set, macro, call and filter blocks, break/continue.
#include "jinja/template_evaluator.h"

#include <algorithm>
#include <memory>

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"

namespace qs::chat {
namespace {

constexpr int kMaxMacroDepth = 200;

// Thrown by {% break %} / {% continue %} and caught by the innermost executing loop.
struct BreakSignal {};
struct ContinueSignal {};

// True if an identifier `name` occurs anywhere in the subtree (decides whether a macro collects
// extra keyword/positional arguments into kwargs/varargs).
bool mentions(const NodeList& nodes, const std::string& name);

bool mentions(const Node* node, const std::string& name) {
  if (!node) return false;
  if (node->kind == NodeKind::kIdentifier && node->text == name) return true;
  return mentions(node->a.get(), name) || mentions(node->b.get(), name) ||
         mentions(node->c.get(), name) || mentions(node->items, name) ||
         mentions(node->body, name) || mentions(node->orelse, name);
}

bool mentions(const NodeList& nodes, const std::string& name) {
  for (const NodePtr& node : nodes) {
    if (mentions(node.get(), name)) return true;
  }
  return false;
}

// Checks that `item` can be bound to the loop target, throwing like the reference if not.
void check_loop_binding(const Node& target, const Value& item) {
  if (target.kind == NodeKind::kIdentifier) return;
  if (!item.is_array())
    throw TemplateError(std::string("Cannot unpack non-iterable type: ") + item.type_name());
  const size_t want = target.items.size();
  const size_t have = item.items().size();
  if (want != have)
    throw TemplateError(std::string("Too ") + (want > have ? "few" : "many") + " items to unpack");
  for (const NodePtr& name : target.items) {
    if (name->kind != NodeKind::kIdentifier)
      throw TemplateError("Cannot unpack to a non-identifier");
  }
}

void bind_loop_target(const Node& target, const Value& item, Environment& scope) {
  if (target.kind == NodeKind::kIdentifier) {
    scope.set(target.text, item);
    return;
  }
  for (size_t i = 0; i < target.items.size(); ++i)
    scope.set(target.items[i]->text, item.items()[i]);
}

Value loop_object(const Array& items, size_t i) {
  const double n = static_cast<double>(items.size());
  const double index = static_cast<double>(i);
  Object loop;
  loop.set("index", Value::integer(index + 1));
  loop.set("index0", Value::integer(index));
  loop.set("revindex", Value::integer(n - index));
  loop.set("revindex0", Value::integer(n - index - 1));
  loop.set("first", Value::boolean(i == 0));
  loop.set("last", Value::boolean(i + 1 == items.size()));
  loop.set("length", Value::integer(n));
  loop.set("previtem", i > 0 ? items[i - 1] : Value());
  loop.set("nextitem", i + 1 < items.size() ? items[i + 1] : Value());
  return Value::object(std::move(loop));
}

}  // namespace

Value Environment::lookup(const std::string& name) const {
  for (const Environment* env = this; env; env = env->parent_) {
    const auto it = env->vars_.find(name);
    if (it != env->vars_.end()) return it->second;
  }
  return Value();
}

std::string Evaluator::render(const NodeList& program, Environment& globals) {
  struct EmptyAssignedNamespaces {
    Evaluator& evaluator;
    ~EmptyAssignedNamespaces() {
      for (const Value& ns : evaluator.assigned_namespaces_) ns.fields().clear();
      evaluator.assigned_namespaces_.clear();
      evaluator.assigned_seen_.clear();
    }
  } empty_assigned{*this};
  std::string out;
  try {
    exec_block(program, globals, out);
  } catch (const BreakSignal&) {
    throw TemplateError("'break' outside of a loop");
  } catch (const ContinueSignal&) {
    throw TemplateError("'continue' outside of a loop");
  }
  return out;
}

void Evaluator::exec_block(const NodeList& nodes, Environment& env, std::string& out) {
  for (const NodePtr& node : nodes) exec(*node, env, out);
}

void Evaluator::exec(const Node& node, Environment& env, std::string& out) {
  try {
    exec_statement(node, env, out);
  } catch (TemplateError& e) {
    if (e.line() == 0) e.set_line(node.line);
    throw;
  }
}

void Evaluator::exec_statement(const Node& node, Environment& env, std::string& out) {
  switch (node.kind) {
    case NodeKind::kText: out += node.text; return;
    case NodeKind::kOutput: {
      const Value value = eval(*node.a, env);
      if (!value.is_null() && !value.is_undefined()) out += print_string(value);
      return;
    }
    case NodeKind::kIf:
      exec_block(eval(*node.a, env).truthy() ? node.body : node.orelse, env, out);
      return;
    case NodeKind::kFor: return exec_for(node, env, out);
    case NodeKind::kSet: return exec_set(node, env);
    case NodeKind::kMacro: return define_macro(node, env);
    case NodeKind::kCallBlock: return exec_call_block(node, env, out);
    case NodeKind::kFilterBlock: {
      std::string body;
      exec_block(node.body, env, body);
      const Value value = apply_filter(*this, *node.a, Value::string(std::move(body)), env);
      if (!value.is_null() && !value.is_undefined()) out += print_string(value);
      return;
    }
    case NodeKind::kBreak: throw BreakSignal();
    case NodeKind::kContinue: throw ContinueSignal();
    default: throw TemplateError("expression used as a statement");
  }
}

void Evaluator::exec_for(const Node& node, Environment& env, std::string& out) {
  Environment scope(&env);
  const Value iterable = eval(*node.b, scope);
  Array all;
  if (iterable.is_array()) {
    all = iterable.items();
  } else if (iterable.is_object()) {
    for (const auto& [key, value] : iterable.fields().entries()) all.push_back(Value::string(key));
  } else {
    throw TemplateError(std::string("Expected iterable or object type in for loop: got ") +
                        iterable.type_name());
  }
  Array items;
  for (const Value& item : all) {
    check_loop_binding(*node.a, item);
    if (node.c) {
      Environment test_scope(&scope);
      bind_loop_target(*node.a, item, test_scope);
      if (!eval(*node.c, test_scope).truthy()) continue;
    }
    items.push_back(item);
  }
  bool no_iteration = true;
  for (size_t i = 0; i < items.size(); ++i) {
    scope.set("loop", loop_object(items, i));
    bind_loop_target(*node.a, items[i], scope);
    const size_t mark = out.size();
    try {
      exec_block(node.body, scope, out);
    } catch (const ContinueSignal&) {
      out.resize(mark);
      continue;
    } catch (const BreakSignal&) {
      out.resize(mark);
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) exec_block(node.orelse, scope, out);
}

void Evaluator::exec_set(const Node& node, Environment& env) {
  Value rhs;
  if (node.b) {
    rhs = eval(*node.b, env);
  } else {
    std::string body;
    exec_block(node.body, env, body);
    rhs = Value::string(std::move(body));
  }
  const Node& target = *node.a;
  if (target.kind == NodeKind::kIdentifier) return env.set(target.text, std::move(rhs));
  if (target.kind == NodeKind::kTuple) {
    if (!rhs.is_array())
      throw TemplateError(std::string("Cannot unpack non-iterable type in set: ") +
                          rhs.type_name());
    const size_t want = target.items.size();
    const size_t have = rhs.items().size();
    if (want != have)
      throw TemplateError(std::string("Too ") + (want > have ? "few" : "many") +
                          " items to unpack in set");
    for (size_t i = 0; i < want; ++i) {
      if (target.items[i]->kind != NodeKind::kIdentifier)
        throw TemplateError("Cannot unpack to a non-identifier in set");
      env.set(target.items[i]->text, rhs.items()[i]);
    }
    return;
  }
  if (target.kind == NodeKind::kMember) {
    const Value object = eval(*target.a, env);
    if (!object.is_namespace())
      throw TemplateError("cannot assign attribute on non-namespace object");
    if (target.flag || target.b->kind != NodeKind::kIdentifier)
      throw TemplateError("Cannot assign to member with non-identifier property");
    if (assigned_seen_.insert(&object.fields()).second) assigned_namespaces_.push_back(object);
    object.fields().set(target.b->text, std::move(rhs));
    return;
  }
  throw TemplateError("invalid target on the left of '=' in set");
}

void Evaluator::define_macro(const Node& node, Environment& env) {
  const Node* macro = &node;
  env.set(node.text, Value::function([this, macro](const CallArgs& args, Environment& caller) {
            return call_macro(*macro, macro->body, "'" + macro->text + "'", args, caller);
          }));
}

// Binds arguments like the reference (positional, then by keyword, then defaults evaluated in
// the macro scope after all names are bound) and renders the body.
Value Evaluator::call_macro(const Node& params, const NodeList& body, const std::string& name,
                            const CallArgs& args, Environment& caller_env) {
  if (macro_depth_ >= kMaxMacroDepth) throw TemplateError("macro calls nested too deeply");
  Environment scope(&caller_env);
  auto keywords = args.keyword;
  std::vector<const Node*> pending;
  for (size_t i = 0; i < params.items.size(); ++i) {
    const Node& param = *params.items[i];
    if (i < args.positional.size()) {
      scope.set(param.text, args.positional[i]);
      continue;
    }
    auto it = std::find_if(keywords.begin(), keywords.end(),
                           [&](const auto& kw) { return kw.first == param.text; });
    if (it != keywords.end()) {
      scope.set(param.text, it->second);
      keywords.erase(it);
      continue;
    }
    if (param.kind == NodeKind::kKeyword) pending.push_back(&param);
    scope.set(param.text, Value());
  }
  const auto is_param = [&](const char* special) {
    return std::any_of(params.items.begin(), params.items.end(),
                       [&](const NodePtr& p) { return p->text == special; });
  };
  if (!is_param("kwargs") && mentions(body, "kwargs")) {
    Object extra;
    for (auto& [key, value] : keywords) extra.set(key, value);
    scope.set("kwargs", Value::object(std::move(extra)));
  } else if (!keywords.empty()) {
    throw TemplateError("macro " + name + " takes no keyword argument '" + keywords.front().first +
                        "'");
  }
  if (!is_param("varargs") && mentions(body, "varargs")) {
    Array extra;
    for (size_t i = params.items.size(); i < args.positional.size(); ++i)
      extra.push_back(args.positional[i]);
    scope.set("varargs", Value::array(std::move(extra)));
  } else if (args.positional.size() > params.items.size()) {
    throw TemplateError("macro " + name + " takes not more than " +
                        std::to_string(params.items.size()) + " argument(s)");
  }
  for (const Node* param : pending) scope.set(param->text, eval(*param->a, scope));
  ++macro_depth_;
  std::string out;
  try {
    exec_block(body, scope, out);
  } catch (...) {
    --macro_depth_;
    throw;
  }
  --macro_depth_;
  return Value::string(std::move(out));
}

void Evaluator::exec_call_block(const Node& node, Environment& env, std::string& out) {
  const Node* block = &node;
  Environment* call_env = &env;
  // `caller` refers to this statement's scope, so it must not run once the statement is done
  // (a macro could have stored it in a namespace).
  const auto active = std::make_shared<bool>(true);
  const Value caller =
      Value::function([this, block, call_env, active](const CallArgs& args, Environment&) {
        if (!*active) throw TemplateError("caller() used outside of its call block");
        return call_macro(*block, block->body, "None", args, *call_env);
      });
  struct Deactivate {
    std::shared_ptr<bool> flag;
    ~Deactivate() { *flag = false; }
  } deactivate{active};
  const Node& call = *node.a;
  const CallArgs args = eval_args(call.items, env);
  const Value fn = eval(*call.a, env);
  if (!fn.is_function())
    throw TemplateError(std::string("Cannot call something that is not a function: got ") +
                        fn.type_name());
  Environment with_caller(&env);
  with_caller.set("caller", caller);
  const Value result = fn.function_value()(args, with_caller);
  if (!result.is_null() && !result.is_undefined()) out += print_string(result);
}

}  // namespace qs::chat
