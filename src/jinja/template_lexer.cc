#include "jinja/template_lexer.h"

#include <array>
#include <utility>

#include "jinja/template_error.h"
#include "jinja/template_preprocess.h"
#include "jinja/template_text.h"

namespace qs::chat {
namespace {

constexpr std::array<std::pair<std::string_view, TokenType>, 29> kOperators = {{
    {"{%", TokenType::kOpenStatement},  {"%}", TokenType::kCloseStatement},
    {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
    {"(", TokenType::kOpenParen},       {")", TokenType::kCloseParen},
    {"{", TokenType::kOpenBrace},       {"}", TokenType::kCloseBrace},
    {"[", TokenType::kOpenBracket},     {"]", TokenType::kCloseBracket},
    {",", TokenType::kComma},           {".", TokenType::kDot},
    {":", TokenType::kColon},           {"|", TokenType::kPipe},
    {"<=", TokenType::kComparison},     {">=", TokenType::kComparison},
    {"==", TokenType::kComparison},     {"!=", TokenType::kComparison},
    {"<", TokenType::kComparison},      {">", TokenType::kComparison},
    {"+", TokenType::kAdditive},        {"-", TokenType::kAdditive},
    {"~", TokenType::kAdditive},        {"**", TokenType::kPower},
    {"*", TokenType::kMultiplicative},  {"//", TokenType::kMultiplicative},
    {"/", TokenType::kMultiplicative},  {"%", TokenType::kMultiplicative},
    {"=", TokenType::kEquals},
}};

bool is_digit(int c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(MappedText source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.text.size()) step();
    return std::move(tokens_);
  }

 private:
  int at(size_t i) const {
    return i < src_.text.size() ? static_cast<unsigned char>(src_.text[i]) : -1;
  }
  bool starts(std::string_view s) const { return src_.text.compare(pos_, s.size(), s) == 0; }
  int line_at(size_t i) const {
    if (src_.lines.empty()) return 1;
    return src_.lines[std::min(i, src_.lines.size() - 1)];
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw TemplateError(message, line_at(pos_));
  }
  void push(TokenType type, std::string value, size_t start) {
    tokens_.push_back(Token{type, std::move(value), line_at(start)});
  }
  bool last_is(std::initializer_list<TokenType> types) const {
    if (tokens_.empty()) return false;
    for (TokenType t : types) {
      if (tokens_.back().type == t) return true;
    }
    return false;
  }

  void step();
  bool consume_text();
  void consume_comment();
  bool consume_whitespace_control();
  bool consume_sign();
  bool consume_operator();
  void consume_string(char quote);
  void consume_number();
  std::string consume_digits();
  void append_escape(std::string& out);
  void strip_trailing_whitespace();
  void skip_leading_whitespace() { pos_ += text::space_run(src_.text, pos_); }

  MappedText src_;
  size_t pos_ = 0;
  int brace_depth_ = 0;
  std::vector<Token> tokens_;
};

void Lexer::step() {
  if (tokens_.empty() ||
      last_is({TokenType::kCloseStatement, TokenType::kCloseExpression, TokenType::kComment})) {
    if (consume_text()) return;
  }
  if (starts("{#")) return consume_comment();
  if (consume_whitespace_control()) return;
  const size_t spaces = text::space_run(src_.text, pos_);
  pos_ += spaces;
  if (spaces > 0 && pos_ >= src_.text.size()) fail("unexpected end of template inside a tag");
  if (starts("-%}") || starts("-}}")) {
    push(starts("-%}") ? TokenType::kCloseStatement : TokenType::kCloseExpression,
         starts("-%}") ? "%}" : "}}", pos_);
    pos_ += 3;
    skip_leading_whitespace();
    return;
  }
  const int c = at(pos_);
  if ((c == '-' || c == '+') && consume_sign()) return;
  if (consume_operator()) return;
  if (c == '\'' || c == '"') return consume_string(static_cast<char>(c));
  if (is_digit(c)) return consume_number();
  if (c >= 0 && text::is_word_byte(static_cast<char>(c))) {
    const size_t start = pos_;
    while (at(pos_) >= 0 && text::is_word_byte(static_cast<char>(at(pos_)))) ++pos_;
    if (pos_ >= src_.text.size()) fail("unexpected end of template inside a tag");
    return push(TokenType::kIdentifier, src_.text.substr(start, pos_ - start), start);
  }
  size_t end = pos_;
  text::decode_utf8(src_.text, end);
  fail("unexpected character '" + src_.text.substr(pos_, end - pos_) + "'");
}

bool Lexer::consume_text() {
  const size_t start = pos_;
  while (pos_ < src_.text.size() &&
         !(at(pos_) == '{' && (at(pos_ + 1) == '%' || at(pos_ + 1) == '{' || at(pos_ + 1) == '#')))
    ++pos_;
  if (pos_ == start) return false;
  push(TokenType::kText, src_.text.substr(start, pos_ - start), start);
  return true;
}

void Lexer::consume_comment() {
  const size_t start = pos_;
  pos_ += 2;
  const bool strip_before = at(pos_) == '-';
  if (strip_before) ++pos_;
  std::string comment;
  while (at(pos_) != '#' || at(pos_ + 1) != '}') {
    if (pos_ + 2 >= src_.text.size())
      throw TemplateError("comment is never closed (missing #})", line_at(start));
    comment.push_back(src_.text[pos_++]);
  }
  const bool strip_after = !comment.empty() && comment.back() == '-';
  if (strip_after) comment.pop_back();
  if (strip_before) strip_trailing_whitespace();
  push(TokenType::kComment, std::move(comment), start);
  pos_ += 2;
  if (strip_after) skip_leading_whitespace();
}

bool Lexer::consume_whitespace_control() {
  const bool statement = starts("{%-");
  if (!statement && !starts("{{-")) return false;
  strip_trailing_whitespace();
  push(statement ? TokenType::kOpenStatement : TokenType::kOpenExpression, statement ? "{%" : "{{",
       pos_);
  if (!statement) brace_depth_ = 0;
  pos_ += 3;
  return true;
}

// A '+' or '-' that cannot be a binary operator is a sign: folded into a following number,
// otherwise a unary operator token. Returns false when it is a binary operator.
bool Lexer::consume_sign() {
  if (tokens_.empty() || last_is({TokenType::kText})) fail("unexpected sign outside an expression");
  if (last_is({TokenType::kIdentifier, TokenType::kNumber, TokenType::kString,
               TokenType::kCloseParen, TokenType::kCloseBracket}))
    return false;
  const size_t start = pos_;
  const char sign = src_.text[pos_++];
  std::string number = consume_digits();
  if (!number.empty() && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
    ++pos_;
    number += '.';
    number += consume_digits();
  }
  if (number.empty()) {
    push(TokenType::kUnary, std::string(1, sign), start);
  } else {
    number.insert(number.begin(), sign);
    push(TokenType::kNumber, std::move(number), start);
  }
  return true;
}

bool Lexer::consume_operator() {
  for (const auto& [seq, type] : kOperators) {
    if (seq == "}}" && brace_depth_ > 0) continue;
    if (!starts(seq)) continue;
    push(type, std::string(seq), pos_);
    if (type == TokenType::kOpenExpression) brace_depth_ = 0;
    if (type == TokenType::kOpenBrace) ++brace_depth_;
    if (type == TokenType::kCloseBrace) --brace_depth_;
    pos_ += seq.size();
    return true;
  }
  return false;
}

void Lexer::append_escape(std::string& out) {
  ++pos_;  // the backslash
  if (pos_ >= src_.text.size()) fail("unterminated string literal");
  const char escaped = src_.text[pos_++];
  if (escaped == 'x' || escaped == 'u') {
    const size_t length = escaped == 'x' ? 2 : 4;
    const std::string hex = src_.text.substr(pos_, length);
    if (hex.size() != length ||
        hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      fail("invalid hexadecimal escape sequence \\" + std::string(1, escaped) + hex);
    text::append_utf8(out, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
    pos_ += length;
    return;
  }
  static constexpr std::string_view kFrom = "ntrbfv'\"\\";
  static constexpr std::string_view kTo = "\n\t\r\b\f\v'\"\\";
  const size_t index = kFrom.find(escaped);
  if (index == std::string_view::npos)
    fail("unexpected escaped character '" + std::string(1, escaped) + "'");
  out.push_back(kTo[index]);
}

void Lexer::consume_string(char quote) {
  const size_t start = pos_++;
  std::string value;
  while (at(pos_) != quote) {
    if (pos_ >= src_.text.size())
      throw TemplateError("unterminated string literal", line_at(start));
    if (at(pos_) == '\\') {
      append_escape(value);
      continue;
    }
    value.push_back(src_.text[pos_++]);
    if (pos_ >= src_.text.size())
      throw TemplateError("unterminated string literal", line_at(start));
  }
  ++pos_;  // closing quote
  push(TokenType::kString, std::move(value), start);
}

std::string Lexer::consume_digits() {
  const size_t start = pos_;
  while (is_digit(at(pos_))) {
    ++pos_;
    if (pos_ >= src_.text.size()) fail("unexpected end of template inside a tag");
  }
  return src_.text.substr(start, pos_ - start);
}

void Lexer::consume_number() {
  const size_t start = pos_;
  std::string number = consume_digits();
  if (!last_is({TokenType::kDot}) && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
    ++pos_;
    number += '.';
    number += consume_digits();
  }
  push(TokenType::kNumber, std::move(number), start);
}

void Lexer::strip_trailing_whitespace() {
  if (!last_is({TokenType::kText})) return;
  std::string& value = tokens_.back().value;
  value.resize(text::trim_end(value).size());
  if (value.empty()) tokens_.pop_back();
}

}  // namespace

const char* token_type_name(TokenType type) {
  switch (type) {
    case TokenType::kText: return "text";
    case TokenType::kNumber: return "number";
    case TokenType::kString: return "string";
    case TokenType::kIdentifier: return "name";
    case TokenType::kEquals: return "'='";
    case TokenType::kOpenParen: return "'('";
    case TokenType::kCloseParen: return "')'";
    case TokenType::kOpenStatement: return "'{%'";
    case TokenType::kCloseStatement: return "'%}'";
    case TokenType::kOpenExpression: return "'{{'";
    case TokenType::kCloseExpression: return "'}}'";
    case TokenType::kOpenBracket: return "'['";
    case TokenType::kCloseBracket: return "']'";
    case TokenType::kOpenBrace: return "'{'";
    case TokenType::kCloseBrace: return "'}'";
    case TokenType::kComma: return "','";
    case TokenType::kDot: return "'.'";
    case TokenType::kColon: return "':'";
    case TokenType::kPipe: return "'|'";
    case TokenType::kAdditive:
    case TokenType::kMultiplicative:
    case TokenType::kPower:
    case TokenType::kComparison:
    case TokenType::kUnary: return "operator";
    case TokenType::kComment: return "comment";
  }
  return "token";
}

std::vector<Token> tokenize(std::string_view source) { return Lexer(preprocess(source)).run(); }

}  // namespace qs::chat
