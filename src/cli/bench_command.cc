// `qwenserve bench`: prefill and decode speed of one sequence, after llama-bench's conventions.
//
//   ppN: one forward pass over N prompt tokens (from position 0, logits of the last token only);
//        tokens/s = N / time.
//   tgN: N forward passes of one token each, after a short prompt (--tg-prompt tokens, prefilled
//        untimed); tokens/s = N / time of the N steps.
//   dbN@C (--decode-batch N, --decode-context C): one decode step of N sequences, each at context C
//        (one new token at position C - 1, greedy sampling of every row); tokens/s = N / step
//        time, and ms/step. The contexts are prefilled first (untimed, in chunks of up to 512
//        tokens), so the step reads real KV.
// Tokens are deterministic pseudo-random ids in [0, vocab) (llama-bench also feeds random tokens;
// no sampling is timed). Each test runs once untimed (warm-up), then -r times; the line reports the
// mean and the sample standard deviation (n - 1) of the per-run tokens/s. model_bytes is the sum of
// the weight tensors' bytes (llama-bench's "size"); for tg tests `weights_gb_per_s` = model_bytes *
// tokens/s / 1e9, the weight read rate a decode step needs (compare with the read bandwidth from
// qwenserve_microbench); for pp tests `gflop_per_s` = prompt_flops(N) * tokens/s / N / 1e9 (see
// prompt_flops). --spec-verify / --spec-repeat add the speculative-decoding tests of
// cli/bench_spec.h after the pp and tg tests.
//
// The KV cache holds what the longest test needs (ppN: N tokens, tgN: --tg-prompt + N, --spec-verify
// K: max(--tg-prompt, 1) + 1 + K, --spec-repeat N: 64 + N) unless -c asks for more. A command line
// bench would run otherwise than asked (a test longer than -c or the model's context, a flag the
// chosen tests do not use, an empty -p / -n list, a --decode-batch whose buffers exceed the memory
// available) is refused before anything runs: UsageError, exit status 2, naming the flag.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/number_validators.h"
#include "cli/commands.h"
#include "cli/bench_flops.h"
#include "cli/bench_spec.h"
#include "cli/runtime.h"
#include "cli/spec_flags.h"
#include "core/error.h"
#include "backend/step_batch.h"
#include "engine/sequence_runner.h"
#include "kv/kv_budget.h"

namespace qs::cli {
namespace {

using Clock = std::chrono::steady_clock;

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
    std::replace(out.begin(), out.end(), ',', '/');
    return out;
  }
};

struct TestResult {
  std::string name;
  double mean = 0;
  double stddev = 0;
  std::vector<double> samples;
};

// A comma list of token counts (-p / -n). 0 means "no such test" and is dropped; an empty list or
// an empty item is refused (give 0 for none).
std::vector<int64_t> parse_list(const std::string& csv, const char* flag, const char* tests) {
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

int64_t saturating_add(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}

// The KV positions one test needs, and a description naming the flag that asked for it.
struct ContextNeed {
  int64_t tokens = 0;
  std::string what;  // e.g. "tg128 (-n 128) needs 136 tokens (the 8-token --tg-prompt + 128)"
};

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
                             "--spec-ngram", "--draft-max", "--speculative-config", "--model-draft"}) {
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
    for (const char* flag : {"--spec-ngram", "--draft-max", "--speculative-config"}) {
      if (opt.given(flag)) {
        throw UsageError(std::string(flag) + " only sets the drafting of the --spec-repeat test (--spec-verify "
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

// The drafting of --spec-repeat: the flags, else n-gram keys of up to 3 tokens x --draft-max drafts.
SpecDecodeOptions spec_repeat_options(const BenchOptions& opt) {
  SpecDecodeOptions spec;
  try {
    spec = opt.spec.resolve();
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
  return spec;
}

// Runs the tests through SequenceRunner, i.e. the step runner and backend path serving uses
// (greedy sampling of the last token's logits row included, as in a serving step).
class Bench {
 public:
  Bench(Runtime& rt, int tg_prompt_tokens) : rt_(rt), tg_prompt_(tg_prompt_tokens), sequence_(*rt.backend) {}

  /// Seconds of one ppN run.
  double run_prompt(int64_t n) {
    const std::vector<int32_t> ids = tokens(n);
    sequence_.reset();
    const auto start = Clock::now();
    sequence_.append(ids, nullptr);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    sequence_.reset();
    return s;
  }

  /// Seconds of the N decode steps of one tgN run.
  double run_gen(int64_t n) {
    const std::vector<int32_t> ids = tokens(tg_prompt_ + n);
    sequence_.reset();
    if (tg_prompt_ > 0) sequence_.append(std::span<const int32_t>(ids.data(), static_cast<size_t>(tg_prompt_)), nullptr);
    const auto start = Clock::now();
    for (int64_t i = 0; i < n; ++i) {
      sequence_.append(std::span<const int32_t>(ids.data() + tg_prompt_ + i, 1), nullptr);
    }
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    sequence_.reset();
    return s;
  }

 private:
  std::vector<int32_t> tokens(int64_t n) {
    const auto vocab = static_cast<uint64_t>(rt_.model->config.vocab_size);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) {
      state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;  // LCG (Knuth MMIX)
      id = static_cast<int32_t>((state_ >> 33) % vocab);
    }
    return ids;
  }

  Runtime& rt_;
  int64_t tg_prompt_;
  uint64_t state_ = 0x9E3779B97F4A7C15ULL;
  SequenceRunner sequence_;
};

TestResult measure(const std::string& name, int64_t n, int repetitions,
                   const std::function<double()>& run_once) {
  TestResult r{name, 0, 0, {}};
  run_once();  // warm-up
  for (int i = 0; i < repetitions; ++i) r.samples.push_back(static_cast<double>(n) / run_once());
  for (double s : r.samples) r.mean += s;
  r.mean /= static_cast<double>(r.samples.size());
  if (r.samples.size() > 1) {
    double ss = 0;
    for (double s : r.samples) ss += (s - r.mean) * (s - r.mean);
    r.stddev = std::sqrt(ss / static_cast<double>(r.samples.size() - 1));
  }
  return r;
}

struct ModelInfo {
  std::string path;
  std::string weight_type;
  size_t model_bytes = 0;
  int threads = 0;
  const ModelConfig* config = nullptr;  // for the pp tests' GFLOP/s
};


void print_header() {
  std::printf("| %-40s | %-8s | %10s | %7s | %8s | %20s | %12s | %8s |\n", "model", "type", "size",
              "threads", "test", "t/s", "weights GB/s", "GFLOP/s");
  std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", std::string(40, '-').c_str(),
              std::string(8, '-').c_str(), std::string(10, '-').c_str(), std::string(7, '-').c_str(),
              std::string(8, '-').c_str(), std::string(20, '-').c_str(), std::string(12, '-').c_str(),
              std::string(8, '-').c_str());
}

// One table row or JSON line, printed as soon as the test finishes (as llama-bench does).
// prompt_tokens > 0: a ppN test (N tokens), which gets its GFLOP/s. `extra` (an object or null):
// more fields at the end of the JSON line.
void print_result(const TestResult& r, bool decode, const ModelInfo& m, int repetitions, bool json,
                  int64_t prompt_tokens = 0, const nlohmann::ordered_json& extra = nullptr) {
  const double gbps = static_cast<double>(m.model_bytes) * r.mean / 1e9;
  const double gflops = prompt_tokens > 0 && m.config != nullptr
                            ? prompt_flops(*m.config, prompt_tokens) * r.mean / static_cast<double>(prompt_tokens) / 1e9
                            : 0.0;
  if (json) {
    nlohmann::ordered_json j = {{"test", r.name},
                                {"tokens_per_second", r.mean},
                                {"stddev", r.stddev},
                                {"model_bytes", m.model_bytes},
                                {"weight_type", m.weight_type},
                                {"threads", m.threads},
                                {"runs", repetitions},
                                {"samples_ts", r.samples},
                                {"model", m.path}};
    if (decode) j["weights_gb_per_s"] = gbps;
    if (gflops > 0) j["gflop_per_s"] = gflops;
    if (extra.is_object()) {
      for (const auto& [key, value] : extra.items()) j[key] = value;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    char ts[64], size[32], rate[32] = "", flop_rate[32] = "";
    std::snprintf(ts, sizeof ts, "%.2f ± %.2f", r.mean, r.stddev);
    std::snprintf(size, sizeof size, "%.2f GiB", static_cast<double>(m.model_bytes) / (1u << 30));
    if (decode) std::snprintf(rate, sizeof rate, "%.2f", gbps);
    if (gflops > 0) std::snprintf(flop_rate, sizeof flop_rate, "%.1f", gflops);
    std::string model = m.path;
    if (model.size() > 40) model = "..." + model.substr(model.size() - 37);
    std::printf("| %-40s | %-8s | %10s | %7d | %8s | %21s | %12s | %8s |\n", model.c_str(),
                m.weight_type.c_str(), size, m.threads, r.name.c_str(), ts, rate, flop_rate);
  }
  std::fflush(stdout);
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

// --decode-batch: a backend prepared for N sequences of C tokens, one decode step timed per run.
int run_decode_batch(const BenchOptions& opt) {
  const int32_t n = opt.decode_batch;
  const int64_t ctx = opt.decode_context;
  RuntimeOptions ro = opt.runtime;
  RuntimeModel loaded = load_runtime_model(ro);
  const ModelConfig& config = loaded.model->config;
  if (ctx > config.max_position_embeddings) {
    throw UsageError("--decode-context " + std::to_string(ctx) + " exceeds the model's context (" +
                     std::to_string(config.max_position_embeddings) + " tokens, max_position_embeddings)");
  }
  const KvDType kv_dtype = parse_kv_dtype(ro.kv_cache_type);
  // The untimed prefill of the contexts goes in chunks of -b tokens (default 512).
  const int64_t chunk = std::min<int64_t>(ctx, opt.given("-b") ? ro.batch_size : 512);
  const BackendOptions bo = ro.backend_options();
  if (bo.device == "cpu") check_decode_batch_memory(opt, config, kv_dtype, chunk);
  const int64_t blocks_per_seq = kv_blocks_for_context(ctx);
  const int64_t total_blocks = blocks_per_seq * n;
  if (total_blocks > std::numeric_limits<int32_t>::max()) {
    throw UsageError("--decode-batch " + std::to_string(n) + " at --decode-context " + std::to_string(ctx) + " needs " +
                     std::to_string(total_blocks) + " KV blocks, more than the " +
                     std::to_string(std::numeric_limits<int32_t>::max()) + " a KV cache can number");
  }
  const std::unique_ptr<Backend> backend = make_backend(bo);
  try {
    backend->prepare(config, loaded.model->weights, BackendLimits{std::max<int64_t>(n, chunk), ctx, n});
  } catch (const Error& e) {
    if (bo.device == "cpu") throw;
    // A device backend sizes its activation and logits buffers for N rows here (no check above).
    throw Error("--decode-batch " + std::to_string(n) + ": the " + bo.device + " backend could not prepare a step of " +
                std::to_string(n) + " sequences: " + e.what());
  }
  // A device backend: the blocks its memory holds after the weights and activations (0 on the CPU).
  if (const int32_t fit = backend->kv_blocks_for_device_memory(kv_dtype); fit > 0 && total_blocks > fit) {
    throw UsageError("--decode-batch " + std::to_string(n) + " at --decode-context " + std::to_string(ctx) + " needs " +
                     std::to_string(total_blocks) + " KV blocks, more than the " + std::to_string(fit) +
                     " the device memory holds within --gpu-memory-utilization; at most --decode-batch " +
                     std::to_string(fit / blocks_per_seq) + " fits at this --decode-context");
  }
  backend->allocate_kv(static_cast<int32_t>(total_blocks), kv_dtype);
  auto table_of = [&](int32_t s) {
    std::vector<int32_t> table(static_cast<size_t>(blocks_per_seq));
    for (int32_t b = 0; b < blocks_per_seq; ++b) table[b] = static_cast<int32_t>(s * blocks_per_seq + b);
    return table;
  };
  auto token_at = [&](int32_t s, int64_t pos) {
    return static_cast<int32_t>((1000003LL * (s + 1) + 7919LL * pos) % config.vocab_size);
  };
  StepBatchBuilder builder;
  StepBatch batch;
  SamplingBatch sampling;
  sampling.vocab_rows = backend->vocab_rows();
  StepOutput out;
  // Untimed prefill of positions [0, ctx - 1) of every sequence.
  for (int32_t s = 0; s < n; ++s) {
    const std::vector<int32_t> table = table_of(s);
    for (int64_t pos = 0; pos < ctx - 1; pos += chunk) {
      std::vector<int32_t> ids(static_cast<size_t>(std::min(chunk, ctx - 1 - pos)));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = token_at(s, pos + static_cast<int64_t>(i));
      builder.clear();
      builder.add_sequence(ids, static_cast<int32_t>(pos), table, 0);
      builder.build(batch);
      backend->forward(batch, sampling, out);
    }
  }
  builder.clear();
  for (int32_t s = 0; s < n; ++s) {
    const int32_t token = token_at(s, ctx - 1);
    builder.add_sequence(std::span<const int32_t>(&token, 1), static_cast<int32_t>(ctx - 1), table_of(s), 1);
  }
  builder.build(batch);
  sampling.rows.resize(static_cast<size_t>(n));
  for (int32_t s = 0; s < n; ++s) {
    sampling.rows[s].seq_id = static_cast<uint64_t>(s);
    sampling.rows[s].temperature = 0.0f;
  }
  const TestResult r = measure("db" + std::to_string(n) + "@" + std::to_string(ctx), n, opt.repetitions, [&] {
    const auto start = Clock::now();
    backend->forward(batch, sampling, out);
    return std::chrono::duration<double>(Clock::now() - start).count();
  });
  const ModelInfo info{opt.runtime.model_path, describe_weight_type(*loaded.model, loaded.quantized.get()),
                       model_weight_bytes(loaded.model->weights), bo.threads};
  const double step_ms = 1000.0 * n / r.mean;  // the mean step time the mean tokens/s implies
  if (!opt.json) print_header();
  print_result(r, false, info, opt.repetitions, opt.json, 0,
               {{"sequences", n}, {"context", ctx}, {"step_ms", step_ms}});
  if (!opt.json) {
    std::printf("%s: %.3f ms per decode step of %d sequence%s at context %lld (%s)\n", r.name.c_str(), step_ms, n,
                n == 1 ? "" : "s", static_cast<long long>(ctx), backend->describe().c_str());
  }
  return 0;
}

int run_bench(BenchOptions& opt) {
  check_flag_combinations(opt);
  if (opt.decode_batch > 0) return run_decode_batch(opt);
  const std::vector<int64_t> prompts = parse_list(opt.prompt_list, "-p", "pp");
  const std::vector<int64_t> gens = parse_list(opt.gen_list, "-n", "tg");
  if (prompts.empty() && gens.empty() && opt.spec_verify == 0 && opt.spec_repeat == 0) {
    throw UsageError("nothing to run: -p and -n are both 0 (and no --spec-verify, --spec-repeat or --decode-batch)");
  }
  if (opt.given("--tg-prompt") && gens.empty() && opt.spec_verify == 0) {
    throw UsageError("--tg-prompt is the untimed prompt of the tg tests (-n) and of --spec-verify; with -n 0 and "
                     "no --spec-verify no test uses it");
  }
  const SpecDecodeOptions spec = spec_repeat_options(opt);
  const int64_t max_p = prompts.empty() ? 1 : *std::max_element(prompts.begin(), prompts.end());
  RuntimeOptions ro = opt.runtime;
  // Positions [0, need) of one sequence: ppN fills N slots, tgN --tg-prompt + N (no slot beyond the
  // last token computed).
  const ContextNeed need = longest_test(prompts, gens, opt);
  if (opt.given("-c") && ro.ctx_size < need.tokens) {
    throw UsageError("--ctx-size " + std::to_string(ro.ctx_size) + " is shorter than the longest test: " + need.what +
                     "; give -c " + std::to_string(need.tokens) + " or more, or leave -c out (bench then sizes the "
                     "context for its longest test)");
  }
  // The KV cache is sized for the longest test unless --ctx-size asks for more (capped at the
  // model's context, with the warning of context_tokens()).
  if (!opt.given("-c")) ro.ctx_size = need.tokens;
  if (!opt.given("-b")) {
    ro.batch_size = std::max<int64_t>({max_p, opt.tg_prompt_tokens, 1 + opt.spec_verify,
                                       opt.spec_repeat > 0 ? kSpecRepeatPromptTokens + spec.draft_max : 0});
  }
  Runtime rt = make_runtime(ro, [&](const ModelConfig& config) {
    if (need.tokens > config.max_position_embeddings) {
      throw UsageError("the longest test does not fit the model's context of " +
                       std::to_string(config.max_position_embeddings) + " tokens (max_position_embeddings): " +
                       need.what);
    }
  });
  const ModelInfo info{opt.runtime.model_path, describe_weight_type(*rt.model, rt.quantized.get()),
                       model_weight_bytes(rt.model->weights), rt.threads, &rt.model->config};
  double prefill_rate = 0;  // the longest pp test's, for the verify-cost bound
  // What the backend chose at load (kernel paths, packed weights, decode prefetch) goes to stderr, so
  // the table and --json output on stdout stay as they were.
  std::fprintf(stderr, "backend: %s\n", rt.backend->describe().c_str());
  {
    Bench bench(rt, opt.tg_prompt_tokens);
    if (!opt.json && (!prompts.empty() || !gens.empty())) print_header();
    for (int64_t n : prompts) {
      const TestResult r = measure("pp" + std::to_string(n), n, opt.repetitions,
                                   [&] { return bench.run_prompt(n); });
      print_result(r, false, info, opt.repetitions, opt.json, n);
      if (n == max_p) prefill_rate = r.mean;
    }
    for (int64_t n : gens) {
      const TestResult r = measure("tg" + std::to_string(n), n, opt.repetitions,
                                   [&] { return bench.run_gen(n); });
      print_result(r, true, info, opt.repetitions, opt.json);
    }
  }  // the Bench's KV blocks go back before the speculative tests take theirs
  SpecBenchOptions so;
  so.verify_max = opt.spec_verify;
  so.repeat_tokens = opt.spec_repeat;
  so.repeat_bias = opt.spec_repeat_bias;
  so.spec = spec;
  so.repetitions = opt.repetitions;
  so.context_tokens = opt.tg_prompt_tokens;
  so.json = opt.json;
  if (so.verify_max > 0) run_spec_verify_curve(*rt.backend, so, prefill_rate);
  if (so.repeat_tokens > 0) run_spec_repeat(*rt.backend, so);
  return 0;
}

}  // namespace

Command register_bench(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  opt->runtime.add_to(app);
  opt->app = &app;
  // bench sizes the context and the prefill chunk for its tests (the shared defaults 4096 / 512
  // do not apply).
  app.get_option("--ctx-size")
      ->description("KV cache length in tokens (default: what the longest test needs; a test longer than -c "
                    "or the model's context is refused; with --decode-batch, at least --decode-context)")
      ->default_str("");
  app.get_option("--batch-size")
      ->description("Prefill chunk: tokens per forward pass (default: the longest prompt or verify step of the "
                    "tests, so each ppN test is one pass; with --decode-batch: the chunk of the untimed prefill, "
                    "default 512)")
      ->default_str("");
  app.add_option("-p,--n-prompt", opt->prompt_list, "Prompt lengths of the ppN tests (comma list; 0: none; an empty list or item is refused)")
      ->capture_default_str();
  app.add_option("-n,--n-gen", opt->gen_list, "Generated tokens of the tgN tests (comma list; 0: none; an empty list or item is refused)")
      ->capture_default_str();
  app.add_option("-r,--repetitions", opt->repetitions, "Timed runs per test (after one warm-up run)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--tg-prompt", opt->tg_prompt_tokens, "Untimed prompt tokens before each tg run (and the context of --spec-verify)")
      ->check(kNonNegative)
      ->capture_default_str();
  app.add_flag("--json", opt->json, "One JSON object per test line");
  app.add_option("--decode-batch", opt->decode_batch,
                 "Instead of the pp, tg and speculative tests (their flags are refused with it): time one decode step "
                 "of N sequences at --decode-context (greedy rows); refused when its KV cache and buffers exceed the "
                 "memory available")
      ->check(kNonNegative);
  app.add_option("--decode-context", opt->decode_context, "Context of each sequence in --decode-batch runs (refused without --decode-batch)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--spec-verify", opt->spec_verify,
                 "Time verify steps with k = 1..K drafts against a one-token decode step (0: off)")
      ->check(CLI::Range(0, kMaxDraftTokens))->capture_default_str();
  app.add_option("--spec-repeat", opt->spec_repeat,
                 "Decode tokens/s with and without speculation on a workload whose output repeats: N greedy tokens (0: off)")
      ->check(kNonNegative)->capture_default_str();
  app.add_option("--spec-repeat-bias", opt->spec_repeat_bias,
                 "Logit bias added to the repeated phrase's tokens in --spec-repeat")
      ->check(CLI::Range(-100.0, 100.0))->capture_default_str();
  opt->spec.add_to(app);
  // In bench the speculative flags only set up --spec-repeat (refused without it); bench has no
  // draft model, so --model-draft is left out of the help (and refused by name if given).
  app.get_option("--spec-ngram")
      ->description("--spec-repeat only: n-gram keys of up to N tokens for its speculative runs (1 to 16, "
                    "default 3)")
      ->default_str("");
  app.get_option("--draft-max")->description("--spec-repeat only: draft tokens verified per step at most");
  app.get_option("--speculative-config")
      ->description("--spec-repeat only: vLLM-style JSON for its speculative runs, e.g. "
                    "{\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":3}");
  app.get_option("--model-draft")->group("");
  app.footer("Flags the chosen tests would not use (e.g. -p with --decode-batch, --spec-ngram without --spec-repeat) "
             "and tests that do not fit -c or the model's context are refused with exit status 2.");
  return [opt] { return run_bench(*opt); };
}

}  // namespace qs::cli
