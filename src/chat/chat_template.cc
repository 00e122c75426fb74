#include "chat/chat_template.h"

#include "jinja/template_builtins.h"
#include "jinja/template_error.h"
#include "jinja/template_evaluator.h"
#include "jinja/template_lexer.h"
#include "jinja/template_parser.h"
#include "core/error.h"

namespace qs {
namespace {

Error to_error(const chat::TemplateError& e) {
  if (e.line() > 0)
    return Error("chat template line " + std::to_string(e.line()) + ": " + e.what());
  return Error(std::string("chat template: ") + e.what());
}

}  // namespace

struct ChatTemplate::Program {
  chat::NodeList nodes;
};

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), program_(std::make_unique<Program>()) {
  try {
    program_->nodes = chat::parse_template(chat::tokenize(source_));
  } catch (const chat::TemplateError& e) {
    throw to_error(e);
  }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  try {
    return render_value(chat::from_json(context));
  } catch (const chat::TemplateError& e) {
    throw to_error(e);
  }
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
  try {
    return render_value(chat::from_json(context));
  } catch (const chat::TemplateError& e) {
    throw to_error(e);
  }
}

// Declares the context's keys next to the globals (a key that collides with a global is an
// error, as in the reference) and runs the program.
std::string ChatTemplate::render_value(const chat::Value& context) const {
  if (!context.is_object()) throw chat::TemplateError("the render context must be a JSON object");
  chat::Environment globals;
  chat::install_globals(globals);
  for (const auto& [key, value] : context.fields().entries()) {
    if (globals.has_own(key))
      throw chat::TemplateError("context variable '" + key + "' collides with a builtin");
    globals.set(key, value);
  }
  chat::Evaluator evaluator;
  return evaluator.render(program_->nodes, globals);
}

}  // namespace qs
