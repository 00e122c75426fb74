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
// available) is refused before anything runs: UsageError, exit status 2, naming the flag (the
// checks: cli/bench_options.h).
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
#include "cli/bench_options.h"
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

struct TestResult {
  std::string name;
  double mean = 0;
  double stddev = 0;
  std::vector<double> samples;
};

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
  const std::vector<int64_t> prompts = parse_token_list(opt.prompt_list, "-p", "pp");
  const std::vector<int64_t> gens = parse_token_list(opt.gen_list, "-n", "tg");
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
