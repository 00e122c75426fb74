// `qwenserve loadtest`: benchmark client for any OpenAI-compatible server (in the manner of vLLM's
// benchmarks/benchmark_serving.py). Metric definitions: src/loadtest/report.h; percentiles:
// src/loadtest/statistics.h; request timing: src/loadtest/sse_client.h.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/number_validators.h"
#include "core/error.h"
#include "loadtest/report.h"
#include "loadtest/runner.h"
#include "loadtest/workload.h"
#include "tokenizer/tokenizer.h"

namespace qs::cli {
namespace {

struct LoadtestOptions {
  std::string url = "http://127.0.0.1:8080";
  std::string model;
  std::string endpoint = "chat";
  std::string api_key;
  std::string concurrency;   // "1,2,4,8"
  std::string request_rate;  // "2,4,inf"
  double burstiness = 1.0;
  int max_concurrency = 0;
  size_t num_requests = 100;
  std::string input_tokens = "256";
  std::string output_tokens = "128";
  std::string dataset;
  int multi_turn = 1;
  std::optional<double> slo_ttft_ms;
  std::optional<double> slo_itl_ms;
  uint64_t seed = 0;
  bool json = false;
  std::string dump_requests;
  double timeout_s = 600;
  bool no_tokenize = false;
  int warmup = 1;
  std::string tokenizer_path;
  bool quiet = false;
};

std::vector<double> parse_number_list(const std::string& text, const std::string& option) {
  std::vector<double> values;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "inf") {
      values.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !(v > 0)) {
      throw Error(option + ": '" + item + "' is not a positive number");
    }
    values.push_back(v);
  }
  if (values.empty()) throw Error(option + ": empty list");
  return values;
}

loadtest::EndpointConfig endpoint_config(const LoadtestOptions& opt) {
  if (opt.endpoint != "chat" && opt.endpoint != "completions") {
    throw Error("--endpoint must be 'chat' or 'completions'");
  }
  return {opt.url, opt.api_key, opt.model, opt.endpoint == "chat", opt.timeout_s};
}

// Prompt sizing: the local tokenizer given by --tokenizer, else the server's /tokenize (unless
// --no-tokenize), else one token per word.
loadtest::TokenCounter make_token_counter(const LoadtestOptions& opt,
                                          const loadtest::EndpointConfig& endpoint) {
  if (!opt.tokenizer_path.empty()) {
    std::string path = opt.tokenizer_path;
    if (path.size() < 5 || path.compare(path.size() - 5, 5, ".json") != 0) path += "/tokenizer.json";
    auto tokenizer = std::make_shared<Tokenizer>(load_tokenizer_json(path));
    return [tokenizer](const std::string& text) -> std::optional<int> {
      return static_cast<int>(tokenizer->encode(text).size());
    };
  }
  if (opt.no_tokenize) return nullptr;
  auto client = std::make_shared<loadtest::StreamClient>(endpoint);
  return [client](const std::string& text) { return client->count_tokens(text); };
}

// The requests of one level. Each level gets its own prompts (seed + level index) so a server's
// prefix cache cannot serve a level from the prompts of the one before; a dataset is the same
// for every level.
std::vector<loadtest::Conversation> make_workload(const LoadtestOptions& opt,
                                                  const loadtest::TokenCounter& counter,
                                                  uint64_t seed, size_t num_requests) {
  loadtest::PromptBuilder prompts(counter, seed);
  loadtest::WorkloadOptions w;
  w.num_requests = num_requests;
  w.turns_per_user = opt.multi_turn;
  w.input = loadtest::parse_length_range(opt.input_tokens, "--input-tokens");
  w.output = loadtest::parse_length_range(opt.output_tokens, "--output-tokens");
  if (w.output.min_tokens < 1) throw Error("--output-tokens: max_tokens must be at least 1");
  w.dataset_path = opt.dataset;
  w.seed = seed;
  auto workload = loadtest::build_workload(w, prompts);
  if (opt.dataset.empty() && !opt.quiet && seed == opt.seed) {
    const char* how = !prompts.measured()          ? "estimated at one token per word"
                      : opt.tokenizer_path.empty() ? "fitted with the server's /tokenize"
                                                   : "fitted with --tokenizer";
    std::cerr << "loadtest: " << workload.size() << " conversations, " << num_requests
              << " requests per level; prompt lengths " << how << "\n";
  }
  if (!opt.dataset.empty() && !opt.quiet && seed == opt.seed && opt.multi_turn > 1) {
    size_t most_turns = 0;
    for (const auto& c : workload) most_turns = std::max(most_turns, c.turns.size());
    if (most_turns < static_cast<size_t>(opt.multi_turn)) {
      std::cerr << "loadtest: warning: --multi-turn " << opt.multi_turn << " but " << opt.dataset
                << "'s conversations have at most " << most_turns << " user turns; each user sends "
                << most_turns << "\n";
    }
  }
  return workload;
}

// Sends --warmup requests one at a time (random single-turn prompts, never the dataset's); their
// results are only counted on stderr.
void run_warmup(const LoadtestOptions& opt, const loadtest::EndpointConfig& endpoint,
                const loadtest::TokenCounter& counter) {
  loadtest::LevelOptions warm;
  warm.endpoint = endpoint;
  warm.concurrency = 1;
  warm.show_progress = false;
  LoadtestOptions warm_opt = opt;
  warm_opt.dataset.clear();
  warm_opt.multi_turn = 1;
  warm_opt.quiet = true;
  const auto result = loadtest::run_level(
      warm, make_workload(warm_opt, counter, opt.seed ^ 0x5741524d, static_cast<size_t>(opt.warmup)));
  size_t ok = 0;
  for (const auto& r : result.records) ok += r.ok() ? 1 : 0;
  if (!opt.quiet) {
    std::cerr << "loadtest: warmup " << ok << "/" << result.records.size()
              << " requests completed (not measured)\n";
  }
}

// Options of level `index`: its concurrency or request rate, and seeds of its own.
loadtest::LevelOptions level_options(const LoadtestOptions& opt,
                                     const loadtest::EndpointConfig& endpoint, bool open_loop,
                                     double value, size_t index) {
  loadtest::LevelOptions level;
  level.endpoint = endpoint;
  level.closed_loop = !open_loop;
  if (open_loop) {
    level.request_rate = value;
  } else {
    level.concurrency = static_cast<int>(value);
  }
  level.burstiness = opt.burstiness;
  level.max_concurrency = opt.max_concurrency;
  level.seed = opt.seed + index;
  level.show_progress = !opt.quiet;
  return level;
}

int run_loadtest(const LoadtestOptions& opt) {
  if (opt.num_requests == 0) throw Error("--num-requests must be >= 1");
  if (opt.multi_turn < 1) throw Error("--multi-turn must be >= 1");
  if (!(opt.burstiness > 0)) throw Error("--burstiness must be > 0");
  const loadtest::EndpointConfig endpoint = endpoint_config(opt);
  const bool open_loop = !opt.request_rate.empty();
  const std::vector<double> levels =
      open_loop ? parse_number_list(opt.request_rate, "--request-rate")
                : parse_number_list(opt.concurrency.empty() ? "1" : opt.concurrency, "--concurrency");
  for (double v : levels) {
    if (!open_loop && (v != std::floor(v) || v > 100000)) {
      throw Error("--concurrency values must be integers (at most 100000)");
    }
  }
  std::ofstream dump;
  if (!opt.dump_requests.empty()) {
    dump.open(opt.dump_requests, std::ios::trunc);
    if (!dump) throw Error(opt.dump_requests + ": cannot open for writing");
  }
  const loadtest::TokenCounter counter = make_token_counter(opt, endpoint);
  if (opt.warmup > 0) run_warmup(opt, endpoint, counter);
  loadtest::SloOptions slo{opt.slo_ttft_ms, opt.slo_itl_ms};
  if (!slo.ttft_ms && !slo.itl_ms) {
    // Goodput against the server's own SLOs (qwenserve exports them in /metrics).
    loadtest::StreamClient probe(endpoint);
    slo = loadtest::slo_from_metrics(probe.metrics_text());
    if ((slo.ttft_ms || slo.itl_ms) && !opt.quiet) {
      std::fprintf(stderr, "goodput SLO from the server: ttft %s ms, itl %s ms\n",
                   slo.ttft_ms ? std::to_string(*slo.ttft_ms).c_str() : "-", slo.itl_ms ? std::to_string(*slo.itl_ms).c_str() : "-");
    }
  }
  size_t total_ok = 0;
  std::string first_error;
  for (size_t i = 0; i < levels.size(); ++i) {
    const loadtest::LevelResult result =
        loadtest::run_level(level_options(opt, endpoint, open_loop, levels[i], i),
                            make_workload(opt, counter, opt.seed + i, opt.num_requests));
    const auto summary = loadtest::level_json(result, slo);
    std::cout << (opt.json ? summary.dump() : loadtest::format_level(summary)) << std::endl;
    if (dump.is_open()) {
      for (const auto& r : result.records) dump << loadtest::record_json(r, result).dump() << "\n";
      dump.flush();
    }
    for (const auto& r : result.records) {
      if (r.ok()) {
        ++total_ok;
      } else if (first_error.empty()) {
        first_error = r.error;
      }
    }
  }
  if (total_ok == 0) {  // nothing was measured: say why and fail, so scripts notice
    std::cerr << "error: no request to " << opt.url << " completed"
              << (first_error.empty() ? std::string() : ": " + first_error) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

Command register_loadtest(CLI::App& app) {
  auto opt = std::make_shared<LoadtestOptions>();
  app.add_option("--url", opt->url, "Server base URL (http://host:port, optionally ending in /v1)")
      ->capture_default_str();
  app.add_option("--model", opt->model, "\"model\" field sent with every request");
  app.add_option("--endpoint", opt->endpoint, "chat (/v1/chat/completions) or completions (/v1/completions)")
      ->capture_default_str();
  app.add_option("--api-key", opt->api_key, "Bearer token");
  auto* conc = app.add_option("--concurrency", opt->concurrency,
                              "Closed loop: simulated users; a list (1,2,4,8) runs one level each (default 1)");
  auto* rate = app.add_option("--request-rate", opt->request_rate,
                              "Open loop: conversation arrivals per second (Poisson; list allowed; inf = all at once)");
  conc->excludes(rate);
  app.add_option("--burstiness", opt->burstiness,
                 "Open loop: gamma shape of inter-arrival gaps (1 = Poisson, <1 burstier)")
      ->capture_default_str();
  app.add_option("--max-concurrency", opt->max_concurrency,
                 "Open loop: cap on conversations in flight (0 = none)")
      ->capture_default_str();
  app.add_option("--num-requests", opt->num_requests, "Requests per level (turns included)")
      ->capture_default_str();
  app.add_option("--input-tokens", opt->input_tokens, "Prompt tokens per turn: N or MIN:MAX (uniform)")
      ->capture_default_str();
  app.add_option("--output-tokens", opt->output_tokens, "max_tokens per request: N or MIN:MAX (uniform)")
      ->capture_default_str();
  app.add_option("--dataset", opt->dataset, "JSONL of {\"messages\": [...]} conversations (user turns are sent)");
  app.add_option("--multi-turn", opt->multi_turn, "Turns per simulated user; each resends the growing history")
      ->capture_default_str();
  app.add_option("--slo-ttft-ms", opt->slo_ttft_ms, "Goodput SLO: TTFT at most this (ms)");
  app.add_option("--slo-itl-ms", opt->slo_itl_ms, "Goodput SLO: every inter-token gap at most this (ms)");
  app.add_option("--warmup", opt->warmup,
                 "Requests sent one at a time before the first level and not measured")
      ->capture_default_str();
  app.add_option("--seed", opt->seed, "Seed of prompts, lengths and arrivals")->check(kSeed)->capture_default_str();
  app.add_option("--timeout", opt->timeout_s, "Read timeout per request (s)")->capture_default_str();
  app.add_flag("--json", opt->json, "Print one JSON object per level instead of a table");
  app.add_option("--dump-requests", opt->dump_requests, "Write one JSON line per request (raw measurements)");
  app.add_option("--tokenizer", opt->tokenizer_path,
                 "tokenizer.json (or its directory) to size prompts locally instead of /tokenize");
  app.add_flag("--no-tokenize", opt->no_tokenize, "Do not call the server's /tokenize to size prompts");
  app.add_flag("-q,--quiet", opt->quiet, "No progress output on stderr");
  return [opt] { return run_loadtest(*opt); };
}

}  // namespace qs::cli
