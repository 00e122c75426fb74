// Lexer of the chat-template language: preprocessing (HF's trim_blocks and lstrip_blocks, the
// transformers-specific {% generation %} tag) and tokenization, following @huggingface/jinja's
// lexer rule for rule so that whitespace handling is byte-identical.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qs::chat {

enum class TokenType {
  kText,             // literal text between tags
  kNumber,           // 123, 1.5, -3 (a sign directly before digits belongs to the literal)
  kString,           // 'text' or "text", escapes resolved
  kIdentifier,       // names and keywords alike
  kEquals,           // =
  kOpenParen,        // (
  kCloseParen,       // )
  kOpenStatement,    // {% or {%-
  kCloseStatement,   // %} or -%}
  kOpenExpression,   // {{ or {{-
  kCloseExpression,  // }} or -}}
  kOpenBracket,      // [
  kCloseBracket,     // ]
  kOpenBrace,        // {
  kCloseBrace,       // }
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a lone + or - in unary position
  kComment,         // {# ... #}
};

struct Token {
  TokenType type;
  std::string value;
  int line;  // 1-based line of the token's first character in the original source
};

/// Human-readable name of a token type, for error messages.
const char* token_type_name(TokenType type);

/// Preprocesses and tokenizes a template. Throws TemplateError with the line of the problem
/// (unterminated comment or string, bad escape, unexpected character).
std::vector<Token> tokenize(std::string_view source);

}  // namespace qs::chat
