// qwenserve: command-line entry point.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"

namespace {

// Prints "error: <message>" as exactly one line: control characters from corrupt input (a newline
// inside a token or a JSON key) are escaped as \n, \r, \t or \xNN; other bytes are kept. Under
// serve --log-format json the line is a JSON object {ts, level: "error", message} (core/log.h).
int report_error(const char* message) {
  if (qs::process_log::uses_json()) {
    std::fflush(stdout);
    qs::process_log::write(qs::process_log::Level::kError, message);
    std::fflush(stderr);
    return 1;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string line = "error: ";
  for (const char* p = message; *p != '\0'; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\r') {
      line += "\\r";
    } else if (c == '\t') {
      line += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      line += "\\x";
      line += kHex[c >> 4];
      line += kHex[c & 15];
    } else {
      line += static_cast<char>(c);
    }
  }
  line += '\n';
  std::fflush(stdout);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  return 1;
}

// CLI11 gives an option the next argument as its value even when that argument is another option
// ("--served-model-name --port 8000" named the model "--port" and left the port at its default).
// The first such value found, as "OPTION VALUE", or "".
std::string value_that_is_an_option(const CLI::App& sub) {
  for (const CLI::Option* option : sub.get_options()) {
    for (const std::string& value : option->results()) {
      if (value.size() < 2 || value[0] != '-') continue;
      if (sub.get_option_no_throw(value.substr(0, value.find('='))) != nullptr) {
        return option->get_name() + " " + value;
      }
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qwenserve: fast, predictable inference for Qwen3 models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qwenserve 0.1.0");
  std::vector<std::pair<CLI::App*, qs::cli::Command>> commands;
  auto add = [&](const char* name, const char* help, auto register_fn) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, register_fn(*sub));
  };
  add("serve", "Serve the OpenAI-compatible API and the web UI", qs::cli::register_serve);
  add("generate", "Generate text from a prompt", qs::cli::register_generate);
  add("info", "Show a model's config, tensors, tokenizer and chat template", qs::cli::register_info);
  add("tokenize", "Print token ids of a text (or text of ids with --decode)",
      qs::cli::register_tokenize);
  add("logits", "Write the logits of every position of a token sequence (f32, for testing)",
      qs::cli::register_logits);
  add("loadtest", "Benchmark an OpenAI-compatible server (TTFT, ITL, throughput)", qs::cli::register_loadtest);
  add("quantize", "Write a GGUF with quantized weights (q8_0, q4_0, q4_k_m, q5_k_m, q6_k, bf16, f16, f32)",
      qs::cli::register_quantize);
  add("bench", "Measure prefill (ppN) and decode (tgN) tokens/s, like llama-bench",
      qs::cli::register_bench);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : commands) {
      if (!sub->parsed()) continue;
      if (const std::string taken = value_that_is_an_option(*sub); !taken.empty()) {
        const std::string flag = taken.substr(0, taken.find(' '));
        return report_error((flag + " is missing its value: it took the option '" + taken.substr(taken.find(' ') + 1) +
                             "' as one").c_str());
      }
      return run();
    }
  } catch (const qs::cli::UsageError& e) {  // a refused command line: status 2
    report_error(e.what());
    return 2;
  } catch (const std::exception& e) {  // qs::Error and anything else
    return report_error(e.what());
  } catch (...) {
    return report_error("unknown exception");
  }
  return 0;
}
