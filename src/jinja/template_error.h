// Error raised inside the chat-template lexer, parser and evaluator.
//
// It carries the 1-based template line it refers to; 0 means "not known yet", and the evaluator
// fills in the line of the innermost node being evaluated as the error propagates. ChatTemplate
// turns it into qs::Error("chat template line N: <message>") at the API boundary.
#pragma once

#include <stdexcept>
#include <string>

namespace qs::chat {

class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(const std::string& message, int line = 0)
      : std::runtime_error(message), line_(line) {}

  int line() const { return line_; }
  void set_line(int line) { line_ = line; }

 private:
  int line_;
};

// Throws a TemplateError without a line (the evaluator fills it in); shared by the globals,
// methods, filters and expression evaluator.
[[noreturn]] inline void fail(const std::string& message) { throw TemplateError(message); }

}  // namespace qs::chat
