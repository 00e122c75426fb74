// Internal to the chat-template parser (template_parser.cc, template_parser_expressions.cc):
// the recursive-descent Parser class. Statements are parsed in template_parser.cc, expressions in
// template_parser_expressions.cc.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/template_ast.h"
#include "jinja/template_error.h"
#include "jinja/template_lexer.h"

namespace qs::chat::detail {

constexpr int kMaxNesting = 200;
// Longest run of operators of one precedence level (a + b + ...), which nests the AST without
// recursion in the parser.
constexpr size_t kMaxChain = 256;

inline NodePtr make(NodeKind kind, int line) { return std::make_unique<Node>(kind, line); }

inline NodePtr make(NodeKind kind, int line, NodePtr a, NodePtr b = nullptr) {
  NodePtr node = make(kind, line);
  node->a = std::move(a);
  node->b = std::move(b);
  return node;
}

enum class ArgsMode { kCall, kParameters };

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  NodeList parse_program() {
    NodeList program;
    while (pos_ < tokens_.size()) {
      if (NodePtr node = parse_any()) program.push_back(std::move(node));
    }
    return program;
  }

 private:
  // --- token helpers -------------------------------------------------------------------------
  const Token* peek(size_t ahead = 0) const {
    return pos_ + ahead < tokens_.size() ? &tokens_[pos_ + ahead] : nullptr;
  }
  bool is(TokenType type, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t && t->type == type;
  }
  bool is_identifier(std::string_view name, size_t ahead = 0) const {
    const Token* t = peek(ahead);
    return t && t->type == TokenType::kIdentifier && t->value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(TokenType::kOpenStatement) || !is(TokenType::kIdentifier, 1)) return false;
    for (std::string_view name : names) {
      if (peek(1)->value == name) return true;
    }
    return false;
  }
  int line() const {
    if (const Token* t = peek()) return t->line;
    return tokens_.empty() ? 1 : tokens_.back().line;
  }
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(message, line()); }
  std::string describe_current() const {
    const Token* t = peek();
    if (!t) return "end of template";
    if (t->type == TokenType::kText) return "text";
    if (t->type == TokenType::kComment) return "a comment";
    return "'" + t->value + "'";
  }
  const Token& expect(TokenType type, const char* context) {
    if (!is(type))
      fail(std::string("expected ") + token_type_name(type) + " " + context + ", got " +
           describe_current());
    return tokens_[pos_++];
  }
  void expect_identifier(std::string_view name) {
    if (!is_identifier(name))
      fail("expected '" + std::string(name) + "', got " + describe_current());
    ++pos_;
  }
  // Guards recursion depth so hostile templates cannot overflow the stack.
  void extend_chain(size_t& length) const {
    if (++length > kMaxChain) fail("expression is too long");
  }
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting) parser.fail("template is nested too deeply");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // --- statements ----------------------------------------------------------------------------
  NodePtr parse_any();
  NodePtr parse_statement();
  NodeList parse_body(std::initializer_list<std::string_view> enders, const std::string& block,
                      int open_line);
  void expect_end(std::string_view name) {
    expect(TokenType::kOpenStatement, ("before " + std::string(name)).c_str());
    expect_identifier(name);
    expect(TokenType::kCloseStatement, ("after " + std::string(name)).c_str());
  }
  NodePtr parse_set(int line);
  NodePtr parse_if(int line);
  NodePtr parse_for(int line);
  NodePtr parse_macro(int line);
  NodePtr parse_call_block(int line);
  NodePtr parse_filter_block(int line);

  // --- expressions ---------------------------------------------------------------------------
  NodePtr parse_sequence(bool primary);
  NodePtr parse_expression();
  NodePtr parse_or();
  NodePtr parse_and();
  NodePtr parse_not();
  NodePtr parse_comparison();
  NodePtr parse_binary_level(TokenType type, NodePtr (Parser::*next)());
  NodePtr parse_additive() {
    return parse_binary_level(TokenType::kAdditive, &Parser::parse_multiplicative);
  }
  NodePtr parse_multiplicative() {
    return parse_binary_level(TokenType::kMultiplicative, &Parser::parse_power);
  }
  NodePtr parse_power() { return parse_binary_level(TokenType::kPower, &Parser::parse_test); }
  NodePtr parse_test();
  NodePtr parse_filter();
  NodePtr parse_filter_name(NodePtr operand);
  NodePtr parse_unary_sign();
  NodePtr parse_call_member();
  NodePtr parse_call(NodePtr callee);
  NodeList parse_args(ArgsMode mode);
  NodePtr parse_argument(ArgsMode mode, bool& saw_keyword, bool& saw_spread);
  NodePtr parse_member(NodePtr object);
  NodePtr parse_subscript(int line);
  NodePtr parse_primary();
  NodePtr parse_collection(TokenType close, NodeKind kind, bool dict);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace qs::chat::detail
