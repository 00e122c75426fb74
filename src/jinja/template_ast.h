// Abstract syntax tree of a parsed chat template.
//
// One node type serves statements and expressions; which fields a node uses depends on its kind
// (listed per kind below). Nodes remember the template line they start on for error messages.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/template_value.h"

namespace qs::chat {

enum class NodeKind {
  // Statements.
  kText,         // text: the literal text
  kOutput,       // {{ a }}
  kIf,           // if a: body, else orelse (an elif is a nested kIf alone in orelse)
  kFor,          // for a (kIdentifier or kTuple) in b [if c]: body, else orelse
  kSet,          // set a = b, or set a (block form, b null): body
  kMacro,        // macro text(items...): body; items are kIdentifier or kKeyword (default)
  kCallBlock,    // call(items...) a: body; a is the kCall, items are the caller's parameters
  kFilterBlock,  // filter a: body; a is a kFilter whose operand (a->a) is null
  kBreak,
  kContinue,
  // Expressions.
  kLiteral,        // value: an integer, float or string constant
  kIdentifier,     // text: the name
  kArray,          // [items...]
  kTuple,          // (items...) or a bare comma list
  kDict,           // {items[0]: items[1], items[2]: items[3], ...}
  kMember,         // a.b (b a kIdentifier or integer kLiteral) or, with flag, a[b]
  kSlice,          // the `[a:b:c]` part of a kMember; absent parts are null
  kCall,           // a(items...); items may be kKeyword, kSpread or kKeywordSpread
  kKeyword,        // text=a, as a call argument or a parameter default
  kSpread,         // *a in a call
  kKeywordSpread,  // **a in a call
  kUnary,          // text a, text in {not, -, +}
  kBinary,         // a text b
  kFilter,         // a | text, with (items...) when flag (written with parentheses)
  kTest,           // a is [not, when flag] text, with (items...) arguments if any
  kSelect,         // a if b (no else: undefined when b is false)
  kTernary,        // b if a else c
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  Node(NodeKind kind, int line) : kind(kind), line(line) {}

  NodeKind kind;
  int line;
  std::string text;
  Value value;
  bool flag = false;
  NodePtr a;
  NodePtr b;
  NodePtr c;
  NodeList items;
  NodeList body;
  NodeList orelse;
};

}  // namespace qs::chat
