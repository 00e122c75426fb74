// Parser, statement part: the template body, block statements and their end tags.
#include "jinja/template_parser.h"

#include "jinja/template_parser_internal.h"

namespace qs::chat {
namespace detail {

NodePtr Parser::parse_any() {
  DepthGuard guard(*this);
  const Token& token = *peek();
  switch (token.type) {
    case TokenType::kComment: ++pos_; return nullptr;
    case TokenType::kText: {
      NodePtr node = make(NodeKind::kText, token.line);
      node->text = token.value;
      ++pos_;
      return node;
    }
    case TokenType::kOpenStatement: return parse_statement();
    case TokenType::kOpenExpression: {
      ++pos_;
      NodePtr node = make(NodeKind::kOutput, token.line, parse_expression());
      expect(TokenType::kCloseExpression, "to close the expression");
      return node;
    }
    default: fail("unexpected " + describe_current());
  }
}

NodeList Parser::parse_body(std::initializer_list<std::string_view> enders,
                            const std::string& block, int open_line) {
  NodeList body;
  while (!is_statement(enders)) {
    if (!peek()) {
      std::string expected;
      for (std::string_view e : enders)
        expected += (expected.empty() ? "" : " or ") + std::string(e);
      throw TemplateError("'" + block + "' block is never closed (expected {% " + expected + " %})",
                          open_line);
    }
    if (NodePtr node = parse_any()) body.push_back(std::move(node));
  }
  return body;
}

NodePtr Parser::parse_statement() {
  const int open_line = line();
  expect(TokenType::kOpenStatement, "");
  if (!is(TokenType::kIdentifier))
    fail("expected a statement name after {%, got " + describe_current());
  const std::string name = peek()->value;
  ++pos_;
  if (name == "set") return parse_set(open_line);
  if (name == "if") {
    NodePtr node = parse_if(open_line);
    expect_end("endif");
    return node;
  }
  if (name == "for") return parse_for(open_line);
  if (name == "macro") return parse_macro(open_line);
  if (name == "call") return parse_call_block(open_line);
  if (name == "filter") return parse_filter_block(open_line);
  if (name == "break" || name == "continue") {
    expect(TokenType::kCloseStatement, ("after " + name).c_str());
    return make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, open_line);
  }
  throw TemplateError("unknown statement '" + name + "'", open_line);
}

NodePtr Parser::parse_set(int line) {
  NodePtr node = make(NodeKind::kSet, line, parse_sequence(false));
  if (is(TokenType::kEquals)) {
    ++pos_;
    node->b = parse_sequence(false);
  } else {
    expect(TokenType::kCloseStatement, "after the set target");
    node->body = parse_body({"endset"}, "set", line);
    expect(TokenType::kOpenStatement, "before endset");
    expect_identifier("endset");
  }
  expect(TokenType::kCloseStatement, "to close the set statement");
  return node;
}

NodePtr Parser::parse_if(int line) {
  NodePtr node = make(NodeKind::kIf, line, parse_expression());
  expect(TokenType::kCloseStatement, "after the if condition");
  node->body = parse_body({"elif", "else", "endif"}, "if", line);
  if (is_statement({"elif"})) {
    const int elif_line = this->line();
    pos_ += 2;
    node->orelse.push_back(parse_if(elif_line));
  } else if (is_statement({"else"})) {
    pos_ += 2;
    expect(TokenType::kCloseStatement, "after else");
    node->orelse = parse_body({"endif"}, "if", line);
  }
  return node;
}

NodePtr Parser::parse_for(int line) {
  NodePtr target = parse_sequence(true);
  if (target->kind != NodeKind::kIdentifier && target->kind != NodeKind::kTuple)
    fail("expected a name or a tuple of names as the loop variable");
  expect_identifier("in");
  NodePtr iterable = parse_expression();
  NodePtr node = make(NodeKind::kFor, line, std::move(target));
  if (iterable->kind == NodeKind::kSelect) {
    node->b = std::move(iterable->a);
    node->c = std::move(iterable->b);
  } else {
    node->b = std::move(iterable);
  }
  expect(TokenType::kCloseStatement, "after the for loop header");
  node->body = parse_body({"endfor", "else"}, "for", line);
  if (is_statement({"else"})) {
    pos_ += 2;
    expect(TokenType::kCloseStatement, "after else");
    node->orelse = parse_body({"endfor"}, "for", line);
  }
  expect_end("endfor");
  return node;
}

NodePtr Parser::parse_macro(int line) {
  NodePtr name = parse_primary();
  if (name->kind != NodeKind::kIdentifier) fail("expected a macro name");
  NodePtr node = make(NodeKind::kMacro, line);
  node->text = name->text;
  node->items = parse_args(ArgsMode::kParameters);
  expect(TokenType::kCloseStatement, "after the macro signature");
  node->body = parse_body({"endmacro"}, "macro", line);
  expect_end("endmacro");
  return node;
}

NodePtr Parser::parse_call_block(int line) {
  NodePtr node = make(NodeKind::kCallBlock, line);
  if (is(TokenType::kOpenParen)) node->items = parse_args(ArgsMode::kParameters);
  NodePtr callee = parse_primary();
  if (callee->kind != NodeKind::kIdentifier) fail("expected a macro name after call");
  const int callee_line = callee->line;
  node->a = make(NodeKind::kCall, callee_line, std::move(callee));
  node->a->items = parse_args(ArgsMode::kCall);
  expect(TokenType::kCloseStatement, "after the call statement");
  node->body = parse_body({"endcall"}, "call", line);
  expect_end("endcall");
  return node;
}

NodePtr Parser::parse_filter_block(int line) {
  NodePtr node = make(NodeKind::kFilterBlock, line, parse_filter_name(nullptr));
  expect(TokenType::kCloseStatement, "after the filter name");
  node->body = parse_body({"endfilter"}, "filter", line);
  expect_end("endfilter");
  return node;
}

}  // namespace detail

NodeList parse_template(std::vector<Token> tokens) {
  return detail::Parser(std::move(tokens)).parse_program();
}

}  // namespace qs::chat
