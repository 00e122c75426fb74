// qwenserve: command-line entry point.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"qwenserve: fast, predictable inference for Qwen3 models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qwenserve 0.1.0");
  std::vector<std::pair<CLI::App*, qs::cli::Command>> commands;
  auto add = [&](const char* name, const char* help, auto register_fn) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, register_fn(*sub));
  };
  add("generate", "Generate text from a prompt", qs::cli::register_generate);
  add("info", "Show a model's config, tensors, tokenizer and chat template", qs::cli::register_info);
  add("tokenize", "Print token ids of a text (or text of ids with --decode)",
      qs::cli::register_tokenize);
  add("logits", "Write the logits of every position of a token sequence (f32, for testing)",
      qs::cli::register_logits);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : commands) {
      if (sub->parsed()) return run();
    }
  } catch (const qs::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
