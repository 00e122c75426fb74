// Parser, expression part: precedence levels from the ternary down to primary expressions,
// call arguments, member access and slices.
#include <cstdlib>
#include <set>

#include "jinja/template_parser_internal.h"

namespace qs::chat::detail {

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
  if (!is_identifier("else"))
    return make(NodeKind::kSelect, if_line, std::move(value), std::move(test));
  ++pos_;
  NodePtr node = make(NodeKind::kTernary, if_line, std::move(test), std::move(value));
  node->c = parse_expression();
  return node;
}

NodePtr Parser::parse_or() {
  NodePtr left = parse_and();
  size_t chain = 0;
  while (is_identifier("or")) {
    extend_chain(chain);
    const int op_line = line();
    ++pos_;
    left = make(NodeKind::kBinary, op_line, std::move(left), parse_and());
    left->text = "or";
  }
  return left;
}

NodePtr Parser::parse_and() {
  NodePtr left = parse_not();
  size_t chain = 0;
  while (is_identifier("and")) {
    extend_chain(chain);
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
  size_t chain = 0;
  while (true) {
    extend_chain(chain);
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
  size_t chain = 0;
  while (is(type)) {
    extend_chain(chain);
    const Token& op = tokens_[pos_++];
    left = make(NodeKind::kBinary, op.line, std::move(left), (this->*next)());
    left->text = op.value;
  }
  return left;
}

NodePtr Parser::parse_test() {
  NodePtr operand = parse_filter();
  size_t chain = 0;
  while (is_identifier("is")) {
    extend_chain(chain);
    const int test_line = line();
    ++pos_;
    const bool negate = is_identifier("not");
    if (negate) ++pos_;
    if (!is(TokenType::kIdentifier))
      fail("expected a test name after 'is', got " + describe_current());
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
  size_t chain = 0;
  while (is(TokenType::kPipe)) {
    extend_chain(chain);
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
  DepthGuard guard(*this);
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
  size_t chain = 0;
  while (is(TokenType::kDot) || is(TokenType::kOpenBracket)) {
    extend_chain(chain);
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
    default: --pos_; fail("expected an expression, got " + describe_current());
  }
}

}  // namespace qs::chat::detail
