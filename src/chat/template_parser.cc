#include "chat/template_parser.h"

#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string_view>

#include "chat/template_error.h"

namespace qs::chat {
namespace {

constexpr int kMaxNesting = 200;

NodePtr make(NodeKind kind, int line) { return std::make_unique<Node>(kind, line); }

NodePtr make(NodeKind kind, int line, NodePtr a, NodePtr b = nullptr) {
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
    if (!is_identifier(name)) fail("expected '" + std::string(name) + "', got " + describe_current());
    ++pos_;
  }
  // Guards recursion depth so hostile templates cannot overflow the stack.
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
  NodePtr parse_additive() { return parse_binary_level(TokenType::kAdditive, &Parser::parse_multiplicative); }
  NodePtr parse_multiplicative() { return parse_binary_level(TokenType::kMultiplicative, &Parser::parse_power); }
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

NodePtr Parser::parse_any() {
  DepthGuard guard(*this);
  const Token& token = *peek();
  switch (token.type) {
    case TokenType::kComment:
      ++pos_;
      return nullptr;
    case TokenType::kText: {
      NodePtr node = make(NodeKind::kText, token.line);
      node->text = token.value;
      ++pos_;
      return node;
    }
    case TokenType::kOpenStatement:
      return parse_statement();
    case TokenType::kOpenExpression: {
      ++pos_;
      NodePtr node = make(NodeKind::kOutput, token.line, parse_expression());
      expect(TokenType::kCloseExpression, "to close the expression");
      return node;
    }
    default:
      fail("unexpected " + describe_current());
  }
}

NodeList Parser::parse_body(std::initializer_list<std::string_view> enders, const std::string& block,
                            int open_line) {
  NodeList body;
  while (!is_statement(enders)) {
    if (!peek()) {
      std::string expected;
      for (std::string_view e : enders) expected += (expected.empty() ? "" : " or ") + std::string(e);
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
  if (!is(TokenType::kIdentifier)) fail("expected a statement name after {%, got " + describe_current());
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
  node->a = make(NodeKind::kCall, callee->line, std::move(callee));
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

NodePtr Parser::parse_sequence(bool primary) {
  const int start = line();
  NodePtr first = primary ? parse_primary() : parse_expression();
  if (!is(TokenType::kComma)) return first;
  NodePtr tuple = make(NodeKind::kTuple, start);
  tuple->items.push_back(std::move(first));
  while (is(TokenType::kComma)) {
    ++pos_;
    tuple->items.push_back(primary ? parse_primary() : parse_expression());
  }
  return tuple;
}

NodePtr Parser::parse_expression() {
  DepthGuard guard(*this);
  NodePtr value = parse_or();
  if (!is_identifier("if")) return value;
  const int if_line = line();
  ++pos_;
  NodePtr test = parse_or();
  if (!is_identifier("else")) return make(NodeKind::kSelect, if_line, std::move(value), std::move(test));
  ++pos_;
  NodePtr node = make(NodeKind::kTernary, if_line, std::move(test), std::move(value));
  node->c = parse_expression();
  return node;
}

NodePtr Parser::parse_or() {
  NodePtr left = parse_and();
  while (is_identifier("or")) {
    const int op_line = line();
    ++pos_;
    left = make(NodeKind::kBinary, op_line, std::move(left), parse_and());
    left->text = "or";
  }
  return left;
}

NodePtr Parser::parse_and() {
  NodePtr left = parse_not();
  while (is_identifier("and")) {
    const int op_line = line();
    ++pos_;
    left = make(NodeKind::kBinary, op_line, std::move(left), parse_not());
    left->text = "and";
  }
  return left;
}

NodePtr Parser::parse_not() {
  NodePtr result;
  while (is_identifier("not")) {
    DepthGuard guard(*this);
    const int op_line = line();
    ++pos_;
    result = make(NodeKind::kUnary, op_line, parse_not());
    result->text = "not";
  }
  return result ? std::move(result) : parse_comparison();
}

NodePtr Parser::parse_comparison() {
  NodePtr left = parse_additive();
  while (true) {
    const int op_line = line();
    std::string op;
    if (is_identifier("not") && is_identifier("in", 1)) {
      op = "not in";
      pos_ += 2;
    } else if (is_identifier("in") || is(TokenType::kComparison)) {
      op = peek()->value;
      ++pos_;
    } else {
      return left;
    }
    left = make(NodeKind::kBinary, op_line, std::move(left), parse_additive());
    left->text = op;
  }
}

NodePtr Parser::parse_binary_level(TokenType type, NodePtr (Parser::*next)()) {
  NodePtr left = (this->*next)();
  while (is(type)) {
    const Token& op = tokens_[pos_++];
    left = make(NodeKind::kBinary, op.line, std::move(left), (this->*next)());
    left->text = op.value;
  }
  return left;
}

NodePtr Parser::parse_test() {
  NodePtr operand = parse_filter();
  while (is_identifier("is")) {
    const int test_line = line();
    ++pos_;
    const bool negate = is_identifier("not");
    if (negate) ++pos_;
    if (!is(TokenType::kIdentifier)) fail("expected a test name after 'is', got " + describe_current());
    NodePtr node = make(NodeKind::kTest, test_line, std::move(operand));
    node->text = tokens_[pos_++].value;
    node->flag = negate;
    if (is(TokenType::kOpenParen)) node->items = parse_args(ArgsMode::kCall);
    operand = std::move(node);
  }
  return operand;
}

NodePtr Parser::parse_filter() {
  NodePtr operand = parse_unary_sign();
  while (is(TokenType::kPipe)) {
    ++pos_;
    operand = parse_filter_name(std::move(operand));
  }
  return operand;
}

NodePtr Parser::parse_filter_name(NodePtr operand) {
  if (!is(TokenType::kIdentifier)) fail("expected a filter name, got " + describe_current());
  NodePtr node = make(NodeKind::kFilter, line(), std::move(operand));
  node->text = tokens_[pos_++].value;
  if (is(TokenType::kOpenParen)) {
    node->flag = true;
    node->items = parse_args(ArgsMode::kCall);
  }
  return node;
}

NodePtr Parser::parse_unary_sign() {
  const Token* t = peek();
  if (t && (t->type == TokenType::kUnary || t->type == TokenType::kAdditive) &&
      (t->value == "-" || t->value == "+")) {
    DepthGuard guard(*this);
    ++pos_;
    NodePtr node = make(NodeKind::kUnary, t->line, parse_unary_sign());
    node->text = t->value;
    return node;
  }
  return parse_call_member();
}

NodePtr Parser::parse_call_member() {
  NodePtr member = parse_member(parse_primary());
  return is(TokenType::kOpenParen) ? parse_call(std::move(member)) : std::move(member);
}

NodePtr Parser::parse_call(NodePtr callee) {
  const int call_line = line();
  NodePtr node = make(NodeKind::kCall, call_line, std::move(callee));
  node->items = parse_args(ArgsMode::kCall);
  node = parse_member(std::move(node));
  return is(TokenType::kOpenParen) ? parse_call(std::move(node)) : std::move(node);
}

NodeList Parser::parse_args(ArgsMode mode) {
  expect(TokenType::kOpenParen, "to open the argument list");
  NodeList args;
  std::set<std::string> names;
  bool saw_keyword = false;
  bool saw_spread = false;
  while (!is(TokenType::kCloseParen)) {
    NodePtr arg = parse_argument(mode, saw_keyword, saw_spread);
    if (mode == ArgsMode::kParameters) {
      const std::string& name = arg->text;  // parameter or keyword name
      if (!names.insert(name).second) fail("duplicate parameter name '" + name + "'");
    }
    const bool last_keyword_spread = arg->kind == NodeKind::kKeywordSpread;
    args.push_back(std::move(arg));
    if (is(TokenType::kComma)) ++pos_;
    if (last_keyword_spread && !is(TokenType::kCloseParen)) fail("'**' must be the last argument");
  }
  expect(TokenType::kCloseParen, "to close the argument list");
  return args;
}

NodePtr Parser::parse_argument(ArgsMode mode, bool& saw_keyword, bool& saw_spread) {
  const int arg_line = line();
  const bool keyword_spread = is(TokenType::kPower);
  const bool spread = is(TokenType::kMultiplicative) && peek()->value == "*";
  if ((keyword_spread || spread) && mode == ArgsMode::kParameters)
    fail("argument unpacking is not allowed in parameter declarations");
  if (keyword_spread || spread) {
    if (spread && saw_spread) fail("only one '*' argument unpacking is allowed");
    saw_spread = saw_spread || spread;
    ++pos_;
    return make(keyword_spread ? NodeKind::kKeywordSpread : NodeKind::kSpread, arg_line,
                parse_expression());
  }
  NodePtr arg = parse_expression();
  if (is(TokenType::kEquals)) {
    ++pos_;
    if (arg->kind != NodeKind::kIdentifier) fail("expected a name before '='");
    NodePtr keyword = make(NodeKind::kKeyword, arg_line, parse_expression());
    keyword->text = arg->text;
    saw_keyword = true;
    return keyword;
  }
  if (mode == ArgsMode::kParameters && arg->kind != NodeKind::kIdentifier)
    fail("expected a parameter name");
  if (saw_keyword)
    fail(mode == ArgsMode::kCall ? "positional argument follows keyword argument"
                                 : "parameter without default follows parameter with default");
  if (saw_spread) fail("positional argument follows '*' unpacking");
  return arg;
}

NodePtr Parser::parse_member(NodePtr object) {
  while (is(TokenType::kDot) || is(TokenType::kOpenBracket)) {
    const Token& op = tokens_[pos_++];
    NodePtr node = make(NodeKind::kMember, op.line, std::move(object));
    node->flag = op.type == TokenType::kOpenBracket;
    if (node->flag) {
      node->b = parse_subscript(op.line);
      expect(TokenType::kCloseBracket, "to close the subscript");
    } else {
      node->b = parse_primary();
      const bool integer = node->b->kind == NodeKind::kLiteral && node->b->value.is_int();
      if (node->b->kind != NodeKind::kIdentifier && !integer)
        fail("expected a name or an integer after '.'");
    }
    object = std::move(node);
  }
  return object;
}

NodePtr Parser::parse_subscript(int line) {
  NodeList parts;
  bool slice = false;
  while (!is(TokenType::kCloseBracket)) {
    if (!peek()) fail("expected ']' to close the subscript, got end of template");
    if (is(TokenType::kColon)) {
      parts.push_back(nullptr);
      ++pos_;
      slice = true;
      continue;
    }
    parts.push_back(parse_expression());
    if (is(TokenType::kColon)) {
      ++pos_;
      slice = true;
    }
  }
  if (parts.empty()) fail("expected an index or slice inside '[]'");
  if (!slice) return std::move(parts[0]);
  if (parts.size() > 3) fail("a slice takes at most three parts");
  NodePtr node = make(NodeKind::kSlice, line);
  node->a = std::move(parts[0]);
  if (parts.size() > 1) node->b = std::move(parts[1]);
  if (parts.size() > 2) node->c = std::move(parts[2]);
  return node;
}

NodePtr Parser::parse_collection(TokenType close, NodeKind kind, bool dict) {
  NodePtr node = make(kind, tokens_[pos_ - 1].line);
  while (!is(close)) {
    if (!peek()) fail("unexpected end of template inside a literal");
    node->items.push_back(parse_expression());
    if (dict) {
      expect(TokenType::kColon, "between key and value");
      node->items.push_back(parse_expression());
    }
    if (is(TokenType::kComma)) ++pos_;
  }
  ++pos_;
  return node;
}

NodePtr Parser::parse_primary() {
  DepthGuard guard(*this);
  if (!peek()) fail("expected an expression, got end of template");
  const Token& token = tokens_[pos_++];
  switch (token.type) {
    case TokenType::kNumber: {
      NodePtr node = make(NodeKind::kLiteral, token.line);
      const double number = std::strtod(token.value.c_str(), nullptr);
      node->value = token.value.find('.') != std::string::npos ? Value::floating(number)
                                                               : Value::integer(number);
      return node;
    }
    case TokenType::kString: {
      std::string value = token.value;
      while (is(TokenType::kString)) value += tokens_[pos_++].value;
      NodePtr node = make(NodeKind::kLiteral, token.line);
      node->value = Value::string(std::move(value));
      return node;
    }
    case TokenType::kIdentifier: {
      NodePtr node = make(NodeKind::kIdentifier, token.line);
      node->text = token.value;
      return node;
    }
    case TokenType::kOpenParen: {
      NodePtr inner = parse_sequence(false);
      expect(TokenType::kCloseParen, "to close the parenthesis");
      return inner;
    }
    case TokenType::kOpenBracket:
      return parse_collection(TokenType::kCloseBracket, NodeKind::kArray, false);
    case TokenType::kOpenBrace:
      return parse_collection(TokenType::kCloseBrace, NodeKind::kDict, true);
    default:
      --pos_;
      fail("expected an expression, got " + describe_current());
  }
}

}  // namespace

NodeList parse_template(std::vector<Token> tokens) { return Parser(std::move(tokens)).parse_program(); }

}  // namespace qs::chat
