// Chat templates: a Jinja2-subset interpreter that renders Hugging Face chat templates
// (tokenizer_config.json "chat_template") byte-identically to @huggingface/jinja, the renderer
// used by transformers.js and the reference our fixtures are generated with
// (tests/fixtures/chat/generate.mjs).
//
// Supported: text, {{ }}, {% %}, {# #}, whitespace control (-), HF's trim_blocks and
// lstrip_blocks, the {% generation %} marker; if/elif/else, for (loop.*, `if` filter, else,
// tuple unpacking), break/continue, set (incl. block set and namespace attributes), macro (with
// defaults, kwargs/varargs), call blocks, filter blocks; the reference's expressions, filters,
// tests and methods, plus a few Jinja2 ones it lacks (see template_builtins.h).
//
// The template sees the context's top-level keys as variables next to the globals true, false,
// none (and True/False/None), namespace, range, raise_exception and strftime_now. Pass
// nlohmann::ordered_json to keep object key order (which tojson output follows); plain
// nlohmann::json orders keys alphabetically.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace qs {

namespace chat {
class Value;
}

class ChatTemplate {
 public:
  /// Parses `source`. Throws qs::Error "chat template line N: <problem>" on syntax errors.
  explicit ChatTemplate(std::string source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  /// Renders with `context` (an object: messages, tools, add_generation_prompt, bos_token,
  /// eos_token, and template kwargs such as enable_thinking). Throws qs::Error
  /// "chat template line N: <problem>" on runtime errors, and with the message passed to
  /// raise_exception(message). Safe to call concurrently.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context) const;

  const std::string& source() const { return source_; }

 private:
  struct Program;
  std::string render_value(const chat::Value& context) const;

  std::string source_;
  std::unique_ptr<Program> program_;
};

}  // namespace qs
