#include "cli/bench_options.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "cli/bench_spec.h"
#include "cli/commands.h"
#include "core/error.h"

namespace qs::cli {
namespace {
int64_t saturating_add(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}
}  // namespace

// A comma list of token counts (-p / -n). 0 means "no such test" and is dropped; an empty list or
// an empty item is refused (give 0 for none).
std::vector<int64_t> parse_token_list(const std::string& csv, const char* flag, const char* tests) {
  const std::string how = std::string("give token counts separated by commas, or 0 for no ") + tests + " tests";
  if (csv.empty()) throw UsageError(std::string(flag) + ": empty list; " + how);
  std::vector<int64_t> out;
  for (size_t start = 0;;) {
    const size_t comma = csv.find(',', start);
    const std::string item = csv.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw UsageError(std::string(flag) + ": empty item in '" + csv + "'; " + how);
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      if (v > 0) out.push_back(v);
    } catch (const std::out_of_range&) {
      throw UsageError(std::string(flag) + ": '" + item + "' is too large");
    } catch (const std::exception&) {
      throw UsageError(std::string(flag) + ": '" + item + "' is not a non-negative integer");
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}


ContextNeed longest_test(const std::vector<int64_t>& prompts, const std::vector<int64_t>& gens,
                         const BenchOptions& opt) {
  ContextNeed best;
  const auto consider = [&](int64_t tokens, const std::string& test, const std::string& how) {
    if (tokens > best.tokens) best = {tokens, test + " needs " + std::to_string(tokens) + " tokens" + how};
  };
  for (int64_t p : prompts) consider(p, "pp" + std::to_string(p) + " (-p " + std::to_string(p) + ")", "");
  for (int64_t g : gens) {
    consider(saturating_add(opt.tg_prompt_tokens, g), "tg" + std::to_string(g) + " (-n " + std::to_string(g) + ")",
             " (the " + std::to_string(opt.tg_prompt_tokens) + "-token --tg-prompt + " + std::to_string(g) + ")");
  }
  if (opt.spec_verify > 0) {
    const int64_t context = std::max<int64_t>(opt.tg_prompt_tokens, 1);  // as run_spec_verify_curve
    consider(context + 1 + opt.spec_verify, "--spec-verify " + std::to_string(opt.spec_verify),
             " (a " + std::to_string(context) + "-token context + 1 + " + std::to_string(opt.spec_verify) + " drafts)");
  }
  if (opt.spec_repeat > 0) {
    consider(saturating_add(kSpecRepeatPromptTokens, opt.spec_repeat), "--spec-repeat " + std::to_string(opt.spec_repeat),
             " (its " + std::to_string(kSpecRepeatPromptTokens) + "-token prompt + " + std::to_string(opt.spec_repeat) + ")");
  }
  return best;
}

// Flags the chosen tests would ignore, refused before the model loads.
void check_flag_combinations(const BenchOptions& opt) {
  if (opt.decode_batch > 0) {
    for (const char* flag : {"-p", "-n", "--tg-prompt", "--spec-verify", "--spec-repeat", "--spec-repeat-bias",
                             "--spec-ngram", "--draft-max", "--speculative-config", "--spec-adaptive", "--model-draft"}) {
      if (opt.given(flag)) {
        throw UsageError(opt.names(flag) + " is not used by --decode-batch, which times one batched decode step "
                         "instead of the pp, tg and speculative tests; run those in a bench without --decode-batch");
      }
    }
    if (opt.given("-c") && opt.runtime.ctx_size < opt.decode_context) {
      throw UsageError("--ctx-size " + std::to_string(opt.runtime.ctx_size) + " is smaller than --decode-context " +
                       std::to_string(opt.decode_context) + ", the context each --decode-batch sequence holds; raise "
                       "-c or leave it out (--decode-batch sizes the KV cache for --decode-context)");
    }
    return;
  }
  if (opt.given("--decode-context")) {
    throw UsageError("--decode-context sets the context of the --decode-batch test and is not used without "
                     "--decode-batch N (N >= 1)");
  }
  if (opt.given("--model-draft")) {
    throw UsageError("--model-draft: bench has no draft model (serve and generate take one); its --spec-repeat "
                     "test drafts by n-gram lookup (--spec-ngram)");
  }
  if (opt.spec_repeat == 0) {
    for (const char* flag : {"--spec-ngram", "--draft-max", "--speculative-config", "--spec-adaptive"}) {
      if (opt.given(flag)) {
        throw UsageError(opt.names(flag) + " only sets the drafting of the --spec-repeat test (--spec-verify "
                         "times k = 1..K drafts of its own) and is not used without --spec-repeat N (N >= 1)");
      }
    }
    if (opt.given("--spec-repeat-bias")) {
      throw UsageError("--spec-repeat-bias only biases the --spec-repeat workload and is not used without "
                       "--spec-repeat N (N >= 1)");
    }
  } else if (opt.given("--spec-ngram") && opt.spec.ngram == 0) {
    throw UsageError("--spec-ngram 0 turns speculation off, but --spec-repeat compares decoding without and with "
                     "it; give --spec-ngram 1 to 16, or leave it out (default 3)");
  }
}

// The drafting of --spec-repeat: the flags, else n-gram keys of up to 3 tokens x --draft-max drafts;
// --spec-adaptive with either.
SpecDecodeOptions spec_repeat_options(const BenchOptions& opt) {
  SpecDecodeOptions spec;
  SpecFlags flags = opt.spec;
  flags.adaptive = false;  // --spec-adaptive alone keeps the n-gram default below
  try {
    spec = flags.resolve();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (!spec.enabled()) {
    spec.ngram_max = 3;
    spec.ngram_min = 1;
    spec.draft_max = opt.spec.draft_max;
  }
  spec.adaptive = opt.spec.adaptive;
  return spec;
}

// --decode-batch on the CPU: refuses a batch whose KV cache, logits rows and activations exceed the
// memory available (MemAvailable, else physical memory) before anything is allocated or prefilled;
// the allocation would otherwise fail late (std::bad_alloc after minutes of prefill) or page.
void check_decode_batch_memory(const BenchOptions& opt, const ModelConfig& config, KvDType kv_dtype, int64_t chunk) {
  const double n = opt.decode_batch;
  const double kv_per_seq = static_cast<double>(kv_bytes_per_block_dense(config, kv_dtype)) *
                            static_cast<double>(kv_blocks_for_context(opt.decode_context));
  // The CPU backend's buffers (backend/cpu/model_runner.cc): one f32 logits row per sequence and
  // the activations of every token in the step, sized for max(N, prefill chunk) tokens.
  const double logits_per_seq = 4.0 * static_cast<double>(config.vocab_size);
  const double act_per_token = 4.0 * static_cast<double>(3 * config.hidden_size + 2 * config.q_dim() +
                                                         2 * config.kv_dim() + 2 * config.intermediate_size +
                                                         config.head_dim + 1);
  const double kv = kv_per_seq * n;
  const double buffers = logits_per_seq * n + act_per_token * std::max(n, static_cast<double>(chunk));
  size_t limit = available_memory_bytes();
  const char* limit_name = "memory available (MemAvailable)";
  if (limit == 0) {
    limit = physical_memory_bytes();
    limit_name = "physical memory";
  }
  if (limit == 0 || kv + buffers <= static_cast<double>(limit)) return;
  const auto bytes = [](double b) {
    return format_byte_size(b >= 1.8e19 ? std::numeric_limits<size_t>::max() : static_cast<size_t>(b));
  };
  const double fit = std::floor(static_cast<double>(limit) / (kv_per_seq + logits_per_seq + act_per_token));
  const std::string most = fit >= 1 ? "at most --decode-batch " + std::to_string(static_cast<int64_t>(std::min(fit, n - 1))) +
                                          " fits at this --decode-context"
                                    : "not even one sequence fits: lower --decode-context";
  throw UsageError("--decode-batch " + std::to_string(opt.decode_batch) + " at --decode-context " +
                   std::to_string(opt.decode_context) + " needs at least " + bytes(kv + buffers) + " (KV cache " +
                   bytes(kv) + ", logits and activations " + bytes(buffers) + "), more than the " +
                   format_byte_size(limit) + " of " + limit_name + "; " + most);
}

}  // namespace qs::cli
