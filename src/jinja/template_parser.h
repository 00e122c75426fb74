// Parser of the chat-template language: tokens to AST, with the grammar and operator precedence
// of @huggingface/jinja (ternary < or < and < not < comparison/in < + - ~ < * / // % < ** <
// is-test < |filter < unary sign < call/member < primary).
#pragma once

#include <vector>

#include "jinja/template_ast.h"
#include "jinja/template_lexer.h"

namespace qs::chat {

/// Parses a token stream into the template's top-level statement list. Throws TemplateError
/// with the line of the offending token (for a block that is never closed: the line that opened
/// it).
NodeList parse_template(std::vector<Token> tokens);

}  // namespace qs::chat
