// Entry points of the `qwenserve` subcommands. Each registers its options on the CLI11 app and
// returns the callback that runs it; errors propagate as qs::Error and main() prints them.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "core/error.h"

namespace qs::cli {

/// A command line the command refuses before it runs anything: a bad value, or flags that
/// together would be ignored or could not run. main() prints "error: <message>" (one line) like
/// any qs::Error, but exits with status 2 (a usage error) instead of 1.
class UsageError : public Error {
 public:
  using Error::Error;
};

using Command = std::function<int()>;

Command register_generate(CLI::App& app);
Command register_info(CLI::App& app);
Command register_tokenize(CLI::App& app);
Command register_logits(CLI::App& app);
Command register_serve(CLI::App& app);
Command register_loadtest(CLI::App& app);
Command register_quantize(CLI::App& app);
Command register_bench(CLI::App& app);

}  // namespace qs::cli
