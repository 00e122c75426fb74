// qwenserve_grammar_bench: constrained-decoding speed on the real Qwen3 tokenizer (Google
// Benchmark; not run by ctest).
//
//   Compile/<schema>   JSON Schema -> CompiledGrammar (grammar + token mask cache), no cache.
//                      Time per iteration = one compile.
//   Mask/<schema>      fill_next_token_bitmask per sequence and step, one core: each iteration
//                      replays 8 recorded random walks (uniform choice among allowed tokens, up
//                      to 256 tokens each) with fresh matchers and times every mask call
//                      (thread CPU time, CLOCK_THREAD_CPUTIME_ID). Counters: p50_us, p99_us,
//                      max_us over all timed calls, steps per walk. first_p50_us / first_p99_us /
//                      first_max_us: the same for the recording pass on the fresh grammar, which
//                      also classifies the positions left for first use and fills the shared
//                      TopsMaskCache (what the first requests of a new schema see).
// Five schemas of growing size: s1_flat (2 properties) .. s5_large (about 60 properties, $defs,
// anyOf, nested arrays). The tokenizer: $QS_TOKENIZER_DIR or <source>/.cache/tokenizer-qwen3
// (tools/fetch-tokenizer.sh).
//
// Run: build/release/bench/qwenserve_grammar_bench [--benchmark_filter=Mask]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "constrained/grammar_compiler.h"
#include "constrained/grammar_matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace qs::constrained;

std::string object_props(int n, int start) {
  static const char* kinds[] = {
      R"({"type":"string","maxLength":24})",
      R"({"type":"integer","minimum":0,"maximum":10000})",
      R"({"type":"boolean"})",
      R"({"enum":["low","medium","high","critical"]})",
      R"({"type":"number","minimum":-100,"maximum":100})",
      R"({"type":"array","items":{"type":"string","maxLength":12},"maxItems":4})",
      R"({"type":["string","null"],"maxLength":16})",
      R"({"type":"string","pattern":"^[A-Z]{3}-[0-9]{4}$"})"};
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i > 0) s += ",";
    s += "\"field_" + std::to_string(start + i) + "\":" + kinds[(start + i) % 8];
  }
  return s;
}

std::string required_list(int n, int start, int every) {
  std::string s;
  for (int i = 0; i < n; i += every) {
    if (!s.empty()) s += ",";
    s += "\"field_" + std::to_string(start + i) + "\"";
  }
  return s;
}

const std::map<std::string, std::string>& schemas() {
  static const std::map<std::string, std::string> s = {
      {"s1_flat", R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false})"},
      {"s2_tool_call", R"({"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":14}},"required":["city","unit"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false})"},
      {"s3_nested", "{\"type\":\"object\",\"properties\":{" + object_props(8, 0) +
                        ",\"address\":{\"type\":\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}$\"}},\"required\":[\"street\",\"zip\"]}},\"required\":[" +
                        required_list(8, 0, 2) + ",\"address\"]}"},
      {"s4_medium", "{\"type\":\"object\",\"properties\":{" + object_props(24, 0) +
                        ",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{" + object_props(6, 100) +
                        "},\"required\":[" + required_list(6, 100, 1) + "]},\"maxItems\":3}},\"required\":[" + required_list(24, 0, 3) + "]}"},
      {"s5_large", "{\"$defs\":{\"party\":{\"type\":\"object\",\"properties\":{" + object_props(10, 200) + "},\"required\":[" + required_list(10, 200, 2) +
                       "]},\"line\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"sku\":{\"type\":\"string\",\"pattern\":\"^[A-Z0-9]{8}$\"},\"qty\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":999}},\"required\":[\"sku\",\"qty\"],\"additionalProperties\":false},{\"type\":\"null\"}]}},"
                       "\"type\":\"object\",\"properties\":{" + object_props(40, 0) +
                       ",\"buyer\":{\"$ref\":\"#/$defs/party\"},\"seller\":{\"$ref\":\"#/$defs/party\"},\"lines\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/line\"},\"minItems\":1,\"maxItems\":5}},\"required\":[" +
                       required_list(40, 0, 4) + ",\"buyer\",\"lines\"]}"},
  };
  return s;
}

std::shared_ptr<const TokenVocabulary> vocab() {
  static const auto v = [] {
    const char* env = std::getenv("QS_TOKENIZER_DIR");
    const std::string dir = env != nullptr && *env != '\0' ? env : std::string(QS_SOURCE_DIR) + "/.cache/tokenizer-qwen3";
    qs::Tokenizer tok(qs::load_tokenizer_json(dir + "/tokenizer.json"));
    return TokenVocabulary::from_tokenizer(tok, 151936, {*tok.token_to_id("<|im_end|>"), *tok.token_to_id("<|endoftext|>")});
  }();
  return v;
}

/// CPU time of the calling thread in microseconds (the machine is shared: wall time of a single
/// call includes preemption by other processes).
double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

void BM_Compile(benchmark::State& state, const std::string& name) {
  GrammarCompiler compiler(vocab(), {}, 0);
  const auto src = GrammarSource::json_schema(schemas().at(name));
  size_t bytes = 0;
  // Compile/<schema> reports wall time per compile; cpu_ms_per_compile is the thread CPU time.
  const double c0 = thread_cpu_us();
  for (auto _ : state) {
    auto g = compiler.compile(src);
    bytes = g->memory_bytes();
    benchmark::DoNotOptimize(g);
  }
  state.counters["cache_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["cpu_ms_per_compile"] = (thread_cpu_us() - c0) / 1e3 / static_cast<double>(state.iterations());
}

void BM_Mask(benchmark::State& state, const std::string& name) {
  GrammarCompiler compiler(vocab(), {}, 0);
  const auto g = compiler.compile(GrammarSource::json_schema(schemas().at(name)));
  std::vector<uint32_t> mask(static_cast<size_t>(vocab()->mask_words()));
  // Record the walks once. These first masks of a fresh grammar also classify the positions left
  // for first use and fill the shared TopsMaskCache: timed separately (first_* counters).
  std::vector<std::vector<int32_t>> walks;
  std::vector<double> first_us;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    GrammarMatcher m(g);
    std::mt19937_64 rng(seed);
    std::vector<int32_t> tokens, allowed;
    while (tokens.size() < 256 && !m.is_terminated()) {
      const double t0 = thread_cpu_us();
      m.fill_next_token_bitmask(mask.data());
      first_us.push_back(thread_cpu_us() - t0);
      allowed.clear();
      for (int32_t id = 0; id < vocab()->rows(); ++id) {
        if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
      }
      tokens.push_back(allowed[rng() % allowed.size()]);
      m.accept_token(tokens.back());
    }
    walks.push_back(tokens);
  }
  std::vector<double> us;
  size_t steps = 0;
  for (auto _ : state) {
    for (const auto& w : walks) {
      GrammarMatcher m(g);
      for (int32_t id : w) {
        const double t0 = thread_cpu_us();
        m.fill_next_token_bitmask(mask.data());
        us.push_back(thread_cpu_us() - t0);
        m.accept_token(id);
      }
      steps += w.size();
    }
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[us.size() * 99 / 100];
  state.counters["max_us"] = us.back();
  std::sort(first_us.begin(), first_us.end());
  state.counters["first_p50_us"] = first_us[first_us.size() / 2];
  state.counters["first_p99_us"] = first_us[first_us.size() * 99 / 100];
  state.counters["first_max_us"] = first_us.back();
  state.counters["steps_per_walk"] = static_cast<double>(steps) / static_cast<double>(state.iterations() * walks.size());
}

const bool registered = [] {
  for (const auto& [name, text] : schemas()) {
    benchmark::RegisterBenchmark(("Compile/" + name).c_str(), BM_Compile, name)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("Mask/" + name).c_str(), BM_Mask, name)->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
