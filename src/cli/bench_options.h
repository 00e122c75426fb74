// `qwenserve bench`'s command line: the options, and the checks that refuse a command line bench
// would run otherwise than asked before anything runs (UsageError, exit status 2, naming the flag):
// a test longer than -c or the model's context, a flag the chosen tests do not use, an empty -p /
// -n list, a --decode-batch whose buffers exceed the memory available. bench_command.cc runs the
// tests.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/runtime.h"
#include "cli/spec_flags.h"
#include "kv/kv_budget.h"
#include "model/model_config.h"

namespace qs::cli {

struct BenchOptions {
  RuntimeOptions runtime;
  std::string prompt_list = "512";
  std::string gen_list = "128";
  int repetitions = 5;
  int tg_prompt_tokens = 8;
  bool json = false;
  int decode_batch = 0;      // --decode-batch N (0: the pp / tg tests instead)
  int64_t decode_context = 512;
  int32_t spec_verify = 0;
  int64_t spec_repeat = 0;
  float spec_repeat_bias = 0;
  SpecFlags spec;
  const CLI::App* app = nullptr;  // the bench subcommand, to see which flags were given

  /// Whether the flag (any of its names, e.g. "-p") was on the command line.
  bool given(const std::string& name) const { return app->get_option(name)->count() > 0; }
  /// All names of the flag, e.g. "-p/--n-prompt", for messages.
  std::string names(const std::string& name) const {
    std::string out = app->get_option(name)->get_name(false, true);
    for (size_t open = out.find('{'); open != std::string::npos; open = out.find('{')) {
      out.erase(open, out.find('}', open) == std::string::npos ? std::string::npos : out.find('}', open) - open + 1);
    }  // a flag's default marker, e.g. "--spec-adaptive,--no-spec-adaptive{false}"
    std::replace(out.begin(), out.end(), ',', '/');
    return out;
  }
};

/// A comma list of token counts (-p / -n, `flag`; `tests` is "pp" or "tg" for messages). 0 means
/// "no such test" and is dropped. Throws UsageError for an empty list, an empty item, a negative
/// or non-integer item, or one beyond int64.
std::vector<int64_t> parse_token_list(const std::string& csv, const char* flag, const char* tests);

/// The KV positions (tokens) one test needs, and a description naming the flag that asked for it.
struct ContextNeed {
  int64_t tokens = 0;
  std::string what;  // e.g. "tg128 (-n 128) needs 136 tokens (the 8-token --tg-prompt + 128)"
};

/// The test of the command line that needs the most KV positions: ppN N, tgN --tg-prompt + N,
/// --spec-verify K max(--tg-prompt, 1) + 1 + K, --spec-repeat N kSpecRepeatPromptTokens + N
/// (saturating at INT64_MAX).
ContextNeed longest_test(const std::vector<int64_t>& prompts, const std::vector<int64_t>& gens,
                         const BenchOptions& opt);

/// Throws UsageError naming a flag the chosen tests would ignore (e.g. -p with --decode-batch,
/// --spec-ngram without --spec-repeat, --decode-context without --decode-batch, --model-draft).
void check_flag_combinations(const BenchOptions& opt);

/// The drafting of --spec-repeat: the spec flags, else n-gram keys of up to 3 tokens x --draft-max
/// drafts. Throws UsageError for a bad --speculative-config.
SpecDecodeOptions spec_repeat_options(const BenchOptions& opt);

/// --decode-batch on the CPU: throws UsageError when the KV cache (kv_dtype, --decode-context per
/// sequence), one f32 logits row per sequence and the f32 activations of max(N, chunk) tokens
/// exceed MemAvailable (else physical memory), in bytes, naming the largest N that fits.
void check_decode_batch_memory(const BenchOptions& opt, const ModelConfig& config, KvDType kv_dtype, int64_t chunk);

}  // namespace qs::cli
