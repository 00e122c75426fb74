// Prometheus primitives, registry exposition (parsed back by a strict text-format 0.0.4 parser),
// concurrency, the qwenserve metric set, and `promtool check metrics` when promtool is installed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "metrics/prometheus.h"
#include "metrics/server_metrics.h"

namespace qs::metrics {
namespace {

// ---- A small strict parser for the text exposition format 0.0.4 ----

struct ParsedSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0.0;
};

struct ParsedFamily {
  std::string name;
  std::string help;
  std::string type;
  std::vector<ParsedSample> samples;
};

[[noreturn]] void parse_fail(size_t line_no, const std::string& why) {
  throw std::runtime_error("exposition line " + std::to_string(line_no) + ": " + why);
}

bool valid_metric_name(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
  }
  return true;
}

/// Exactly what Go's strconv.ParseFloat would accept from our writer: special values or a number
/// consumed completely by strtod (no hex floats, no whitespace).
double parse_value(const std::string& token, size_t line_no) {
  if (token == "+Inf") return INFINITY;
  if (token == "-Inf") return -INFINITY;
  if (token == "NaN") return NAN;
  if (token.empty() || token.find_first_of("xXiInN ") != std::string::npos) parse_fail(line_no, "bad value '" + token + "'");
  char* end = nullptr;
  const double v = std::strtod(token.c_str(), &end);
  if (end != token.c_str() + token.size()) parse_fail(line_no, "bad value '" + token + "'");
  return v;
}

/// Reads `"..."` at text[pos] with escapes \\ \" \n only; advances pos past the closing quote.
std::string parse_quoted(const std::string& text, size_t& pos, size_t line_no) {
  if (pos >= text.size() || text[pos] != '"') parse_fail(line_no, "expected '\"'");
  std::string out;
  for (++pos; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c == '"') {
      ++pos;
      return out;
    }
    if (c == '\n') parse_fail(line_no, "raw newline in label value");
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++pos >= text.size()) break;
    if (text[pos] == '\\') out.push_back('\\');
    else if (text[pos] == '"') out.push_back('"');
    else if (text[pos] == 'n') out.push_back('\n');
    else parse_fail(line_no, "bad escape in label value");
  }
  parse_fail(line_no, "unterminated label value");
}

std::map<std::string, std::string> parse_labels(const std::string& text, size_t& pos, size_t line_no) {
  std::map<std::string, std::string> labels;
  ++pos;  // '{'
  while (true) {
    const size_t eq = text.find('=', pos);
    if (eq == std::string::npos) parse_fail(line_no, "label without '='");
    const std::string name = text.substr(pos, eq - pos);
    if (!valid_metric_name(name) || name.find(':') != std::string::npos) parse_fail(line_no, "bad label name");
    pos = eq + 1;
    if (!labels.emplace(name, parse_quoted(text, pos, line_no)).second) parse_fail(line_no, "duplicate label");
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      return labels;
    }
    if (pos >= text.size() || text[pos] != ',') parse_fail(line_no, "expected ',' or '}'");
    ++pos;
  }
}

std::string unescape_help(const std::string& help, size_t line_no) {
  std::string out;
  for (size_t i = 0; i < help.size(); ++i) {
    if (help[i] != '\\') {
      out.push_back(help[i]);
    } else if (i + 1 < help.size() && (help[i + 1] == '\\' || help[i + 1] == 'n')) {
      out.push_back(help[++i] == 'n' ? '\n' : '\\');
    } else {
      parse_fail(line_no, "bad escape in HELP");
    }
  }
  return out;
}

bool sample_belongs(const ParsedFamily& family, const std::string& name) {
  if (family.type != "histogram") return name == family.name;
  return name == family.name + "_bucket" || name == family.name + "_sum" || name == family.name + "_count";
}

void parse_comment(const std::string& line, size_t line_no, std::vector<ParsedFamily>& families,
                   std::set<std::string>& seen) {
  if (line.rfind("# HELP ", 0) == 0) {
    const size_t space = line.find(' ', 7);
    if (space == std::string::npos) parse_fail(line_no, "HELP without text");
    const std::string name = line.substr(7, space - 7);
    if (!valid_metric_name(name) || !seen.insert(name).second) parse_fail(line_no, "bad or repeated family " + name);
    families.push_back({name, unescape_help(line.substr(space + 1), line_no), "", {}});
    return;
  }
  if (line.rfind("# TYPE ", 0) == 0) {
    const size_t space = line.find(' ', 7);
    if (families.empty() || space == std::string::npos || line.substr(7, space - 7) != families.back().name ||
        !families.back().type.empty() || !families.back().samples.empty()) {
      parse_fail(line_no, "TYPE must directly follow the HELP of the same family");
    }
    const std::string type = line.substr(space + 1);
    if (type != "counter" && type != "gauge" && type != "histogram") parse_fail(line_no, "bad type " + type);
    families.back().type = type;
    return;
  }
  parse_fail(line_no, "unexpected comment");
}

ParsedSample parse_sample_line(const std::string& line, size_t line_no) {
  ParsedSample sample;
  size_t pos = line.find_first_of("{ ");
  if (pos == std::string::npos) parse_fail(line_no, "sample without value");
  sample.name = line.substr(0, pos);
  if (!valid_metric_name(sample.name)) parse_fail(line_no, "bad metric name " + sample.name);
  if (line[pos] == '{') sample.labels = parse_labels(line, pos, line_no);
  if (pos >= line.size() || line[pos] != ' ') parse_fail(line_no, "expected one space before value");
  const std::string value = line.substr(pos + 1);
  if (value.find(' ') != std::string::npos) parse_fail(line_no, "unexpected timestamp or trailing space");
  sample.value = parse_value(value, line_no);
  return sample;
}

/// Parses a whole exposition; throws std::runtime_error naming the line on any deviation.
std::vector<ParsedFamily> parse_exposition(const std::string& text) {
  if (text.empty() || text.back() != '\n') throw std::runtime_error("exposition must end with a newline");
  std::vector<ParsedFamily> families;
  std::set<std::string> seen;
  size_t line_no = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.empty()) parse_fail(line_no, "empty line");
    if (line[0] == '#') {
      parse_comment(line, line_no, families, seen);
      continue;
    }
    ParsedSample sample = parse_sample_line(line, line_no);
    if (families.empty() || families.back().type.empty() || !sample_belongs(families.back(), sample.name)) {
      parse_fail(line_no, "sample " + sample.name + " outside its family");
    }
    families.back().samples.push_back(std::move(sample));
  }
  return families;
}

const ParsedFamily& find_family(const std::vector<ParsedFamily>& families, const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return f;
  }
  throw std::runtime_error("no family " + name);
}

struct ParsedHistogram {
  std::vector<double> bounds;  // le values, +Inf last
  std::vector<double> cumulative;
  double sum = NAN;
  double count = NAN;
};

/// Checks the histogram invariants and returns its parts: le strictly increasing ending at +Inf,
/// cumulative counts non-decreasing, +Inf bucket == _count, _sum and _count present once.
ParsedHistogram check_histogram(const ParsedFamily& family) {
  EXPECT_EQ(family.type, "histogram");
  ParsedHistogram h;
  for (const auto& s : family.samples) {
    if (s.name == family.name + "_bucket") {
      EXPECT_EQ(s.labels.size(), 1u);
      const double le = parse_value(s.labels.at("le"), 0);
      if (!h.bounds.empty()) {
        EXPECT_GT(le, h.bounds.back()) << family.name;
        EXPECT_GE(s.value, h.cumulative.back()) << family.name << " le=" << s.labels.at("le");
      }
      h.bounds.push_back(le);
      h.cumulative.push_back(s.value);
    } else if (s.name == family.name + "_sum") {
      EXPECT_TRUE(std::isnan(h.sum)) << "repeated _sum";
      h.sum = s.value;
    } else {
      EXPECT_TRUE(std::isnan(h.count)) << "repeated _count";
      h.count = s.value;
    }
  }
  EXPECT_FALSE(h.bounds.empty());
  if (!h.bounds.empty()) {
    EXPECT_TRUE(std::isinf(h.bounds.back()) && h.bounds.back() > 0) << family.name;
    EXPECT_EQ(h.cumulative.back(), h.count) << family.name;
  }
  EXPECT_FALSE(std::isnan(h.sum));
  return h;
}

// ---- Formatting and escaping ----

TEST(MetricsPrometheus, FormatsValuesThatPrometheusParses) {
  EXPECT_EQ(format_value(0.0), "0");
  EXPECT_EQ(format_value(-0.0), "0");
  EXPECT_EQ(format_value(42.0), "42");
  EXPECT_EQ(format_value(1e6), "1000000");
  EXPECT_EQ(format_value(-3.0), "-3");
  EXPECT_EQ(format_value(123456789012345.0), "123456789012345");
  EXPECT_EQ(format_value(0.001), "0.001");
  EXPECT_EQ(format_value(0.00112), "0.00112");
  EXPECT_EQ(format_value(2.5), "2.5");
  EXPECT_EQ(format_value(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_value(1.5e-9), "1.5e-09");
  EXPECT_EQ(format_value(1e300), "1e+300");
  EXPECT_EQ(format_value(INFINITY), "+Inf");
  EXPECT_EQ(format_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_value(NAN), "NaN");
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-12.0, 18.0);
  for (int i = 0; i < 2000; ++i) {
    const double v = std::pow(10.0, exponent(rng)) * (i % 2 ? 1 : -1);
    EXPECT_EQ(parse_value(format_value(v), 0), v) << format_value(v);
  }
}

TEST(MetricsPrometheus, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(escape_help("x \"quoted\" \\ y\nz"), "x \"quoted\" \\\\ y\\nz");
}

// ---- Registry exposition ----

TEST(MetricsPrometheus, ExposesExactTextFormat) {
  MetricsRegistry registry;
  Counter& requests = registry.add_counter("demo_requests_total", "Requests.\nSecond line \\ end");
  LabeledCounter& by_status = registry.add_labeled_counter("demo_responses_total", "By status.", "status");
  Gauge& depth = registry.add_gauge("demo_queue_depth", "Queue depth.");
  Histogram& latency = registry.add_histogram("demo_latency_seconds", "Latency.", {0.005, 0.1, 1.0});
  requests.inc(3);
  by_status.with("500").inc();
  by_status.with("200").inc(2);
  by_status.with("we\"ird\\\n").inc();
  depth.set(2.5);
  for (double v : {0.001953125, 0.0625, 0.25, 3.0}) latency.observe(v);  // dyadic: exact sum
  const std::string expected =
      "# HELP demo_requests_total Requests.\\nSecond line \\\\ end\n"
      "# TYPE demo_requests_total counter\n"
      "demo_requests_total 3\n"
      "# HELP demo_responses_total By status.\n"
      "# TYPE demo_responses_total counter\n"
      "demo_responses_total{status=\"200\"} 2\n"
      "demo_responses_total{status=\"500\"} 1\n"
      "demo_responses_total{status=\"we\\\"ird\\\\\\n\"} 1\n"
      "# HELP demo_queue_depth Queue depth.\n"
      "# TYPE demo_queue_depth gauge\n"
      "demo_queue_depth 2.5\n"
      "# HELP demo_latency_seconds Latency.\n"
      "# TYPE demo_latency_seconds histogram\n"
      "demo_latency_seconds_bucket{le=\"0.005\"} 1\n"
      "demo_latency_seconds_bucket{le=\"0.1\"} 2\n"
      "demo_latency_seconds_bucket{le=\"1\"} 3\n"
      "demo_latency_seconds_bucket{le=\"+Inf\"} 4\n"
      "demo_latency_seconds_sum 3.314453125\n"
      "demo_latency_seconds_count 4\n";
  EXPECT_EQ(registry.expose_text(), expected);
  const auto families = parse_exposition(registry.expose_text());
  ASSERT_EQ(families.size(), 4u);
  EXPECT_EQ(families[0].help, "Requests.\nSecond line \\ end");
  EXPECT_EQ(families[1].samples[2].labels.at("status"), "we\"ird\\\n");
  check_histogram(families[3]);
}

TEST(MetricsPrometheus, RejectsInvalidRegistrations) {
  MetricsRegistry registry;
  registry.add_counter("ok_total", "x");
  EXPECT_THROW(registry.add_counter("ok_total", "again"), Error);
  EXPECT_THROW(registry.add_gauge("9starts_with_digit", "x"), Error);
  EXPECT_THROW(registry.add_gauge("has-dash", "x"), Error);
  EXPECT_THROW(registry.add_labeled_counter("a_total", "x", "le"), Error);
  EXPECT_THROW(registry.add_labeled_counter("b_total", "x", "__reserved"), Error);
  EXPECT_THROW(registry.add_labeled_counter("c_total", "x", "has:colon"), Error);
  EXPECT_THROW(registry.add_histogram("h1", "x", {}), Error);
  EXPECT_THROW(registry.add_histogram("h2", "x", {1.0, 1.0}), Error);
  EXPECT_THROW(registry.add_histogram("h3", "x", {2.0, 1.0}), Error);
  EXPECT_THROW(registry.add_histogram("h4", "x", {1.0, INFINITY}), Error);
  EXPECT_NO_THROW(registry.add_gauge("name:with_colon", "x"));
}

/// Constant labels come first on every sample; an alias writes its target's samples under its own
/// name and HELP with the target's constant labels, then its own. Expected text written from the
/// exposition format's grammar.
TEST(MetricsPrometheus, ConstantLabelsAndAliases) {
  MetricsRegistry registry;
  registry.add_gauge("demo_info", "Info.", {{"block_size", "16"}, {"num_gpu_blocks", "42"}}).set(1);
  LabeledCounter& done = registry.add_labeled_counter("demo_done_total", "Done.", "reason");
  Histogram& latency = registry.add_histogram("demo_seconds", "Latency.", {0.5});
  registry.add_alias("compat:info", "Info alias.", "demo_info");
  registry.add_alias("compat:done_total", "Done alias.", "demo_done_total", {{"model_name", "m\"1"}});
  registry.add_alias("compat:seconds", "Latency alias.", "demo_seconds", {{"model_name", "m"}});
  done.with("stop").inc(2);
  latency.observe(0.25);
  latency.observe(2.0);
  const std::string expected =
      "# HELP demo_info Info.\n"
      "# TYPE demo_info gauge\n"
      "demo_info{block_size=\"16\",num_gpu_blocks=\"42\"} 1\n"
      "# HELP demo_done_total Done.\n"
      "# TYPE demo_done_total counter\n"
      "demo_done_total{reason=\"stop\"} 2\n"
      "# HELP demo_seconds Latency.\n"
      "# TYPE demo_seconds histogram\n"
      "demo_seconds_bucket{le=\"0.5\"} 1\n"
      "demo_seconds_bucket{le=\"+Inf\"} 2\n"
      "demo_seconds_sum 2.25\n"
      "demo_seconds_count 2\n"
      "# HELP compat:info Info alias.\n"
      "# TYPE compat:info gauge\n"
      "compat:info{block_size=\"16\",num_gpu_blocks=\"42\"} 1\n"
      "# HELP compat:done_total Done alias.\n"
      "# TYPE compat:done_total counter\n"
      "compat:done_total{model_name=\"m\\\"1\",reason=\"stop\"} 2\n"
      "# HELP compat:seconds Latency alias.\n"
      "# TYPE compat:seconds histogram\n"
      "compat:seconds_bucket{model_name=\"m\",le=\"0.5\"} 1\n"
      "compat:seconds_bucket{model_name=\"m\",le=\"+Inf\"} 2\n"
      "compat:seconds_sum{model_name=\"m\"} 2.25\n"
      "compat:seconds_count{model_name=\"m\"} 2\n";
  EXPECT_EQ(registry.expose_text(), expected);
  const auto families = parse_exposition(registry.expose_text());
  ASSERT_EQ(families.size(), 6u);
  EXPECT_EQ(find_family(families, "compat:done_total").samples.at(0).labels.at("model_name"), "m\"1");
}

TEST(MetricsPrometheus, RejectsInvalidConstantLabelsAndAliases) {
  MetricsRegistry registry;
  registry.add_labeled_counter("by_reason_total", "x", "reason");
  registry.add_gauge("g", "x", {{"a", "1"}});
  EXPECT_THROW(registry.add_gauge("g_le", "x", {{"le", "1"}}), Error);
  EXPECT_THROW(registry.add_gauge("g_twice", "x", {{"a", "1"}, {"a", "2"}}), Error);
  EXPECT_THROW(registry.add_gauge("g_bad", "x", {{"bad-name", "1"}}), Error);
  EXPECT_THROW(registry.add_alias("alias_unknown", "x", "no_such_metric"), Error);
  EXPECT_THROW(registry.add_alias("alias_clash", "x", "by_reason_total", {{"reason", "y"}}), Error);
  EXPECT_THROW(registry.add_alias("alias_clash_const", "x", "g", {{"a", "y"}}), Error);
  EXPECT_THROW(registry.add_alias("g", "x", "by_reason_total"), Error);  // name taken
  registry.add_alias("alias_ok", "x", "g", {{"b", "2"}});
  EXPECT_THROW(registry.add_alias("alias_of_alias", "x", "alias_ok"), Error);
}

TEST(MetricsPrometheus, HistogramBucketsAreLeInclusive) {
  Histogram h({1.0, 2.0});
  for (double v : {-5.0, 1.0, std::nextafter(1.0, 2.0), 2.0, 2.5, HUGE_VAL}) h.observe(v);
  h.observe(NAN);  // ignored
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative_counts, (std::vector<std::uint64_t>{2, 4, 6}));
  EXPECT_EQ(s.count(), 6u);
  EXPECT_TRUE(std::isinf(s.sum));
}

TEST(MetricsPrometheus, ParsedHistogramMatchesObservations) {
  MetricsRegistry registry;
  const std::vector<double> bounds = latency_buckets_seconds();
  Histogram& h = registry.add_histogram("t_seconds", "t", bounds);
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> dist(-3.0, 2.0);
  std::vector<double> values;
  double sum = 0.0;
  for (int i = 0; i < 5000; ++i) {
    values.push_back(dist(rng));
    sum += values.back();
    h.observe(values.back());
  }
  const ParsedHistogram parsed = check_histogram(parse_exposition(registry.expose_text()).at(0));
  ASSERT_EQ(parsed.bounds.size(), bounds.size() + 1);
  EXPECT_EQ(parsed.count, 5000.0);
  EXPECT_EQ(parsed.sum, sum);  // same summation order, and format_value round-trips
  for (size_t i = 0; i < bounds.size(); ++i) {
    EXPECT_EQ(parsed.bounds[i], bounds[i]);
    const auto expected = std::count_if(values.begin(), values.end(), [&](double v) { return v <= bounds[i]; });
    EXPECT_EQ(parsed.cumulative[i], static_cast<double>(expected)) << "le=" << bounds[i];
  }
}

// ---- Concurrency ----

TEST(MetricsPrometheus, ConcurrentUpdatesGiveExactCounts) {
  MetricsRegistry registry;
  Counter& counter = registry.add_counter("c_total", "c");
  LabeledCounter& labeled = registry.add_labeled_counter("l_total", "l", "kind");
  Gauge& gauge = registry.add_gauge("g", "g");
  Histogram& hist = registry.add_histogram("h_seconds", "h", {0.25, 0.5, 1.0});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50'000;
  std::atomic<bool> done{false};
  std::thread reader([&] {  // expositions taken mid-update must still be well formed
    while (!done.load()) check_histogram(find_family(parse_exposition(registry.expose_text()), "h_seconds"));
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        counter.inc();
        labeled.with(i % 2 ? "odd" : "even").inc();
        gauge.add(1.0);
        hist.observe(0.25 * (i % 8));  // 0, 0.25, ..., 1.75: sums are exact in double
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  const double total = kThreads * kPerThread;
  const auto families = parse_exposition(registry.expose_text());
  EXPECT_EQ(find_family(families, "c_total").samples.at(0).value, total);
  EXPECT_EQ(labeled.value("odd"), kThreads * kPerThread / 2u);
  EXPECT_EQ(labeled.value("even"), kThreads * kPerThread / 2u);
  EXPECT_EQ(find_family(families, "g").samples.at(0).value, total);
  const ParsedHistogram h = check_histogram(find_family(families, "h_seconds"));
  EXPECT_EQ(h.count, total);
  EXPECT_EQ(h.sum, total / 8 * (0 + 0.25 + 0.5 + 0.75 + 1.0 + 1.25 + 1.5 + 1.75));
  // per 8 observations: le 0.25 holds {0, 0.25}, le 0.5 adds 0.5, le 1 adds 0.75 and 1.0
  EXPECT_EQ(h.cumulative, (std::vector<double>{total / 4, total * 3 / 8, total * 5 / 8, total}));
}

// ---- The qwenserve metric set ----

RequestRecord sample_record(int i) {
  RequestRecord r;
  r.id = "chatcmpl-" + std::to_string(i);
  r.finish_reason = i % 3 ? "stop" : "length";
  r.prompt_tokens = 10 + i;
  r.completion_tokens = 4;
  r.queue_ms = 2.0 * i;
  r.ttft_ms = 50.0 + i;
  r.itl_ms = {20.0, 21.0, 22.0};
  r.e2e_ms = 120.0 + i;
  r.max_tokens = 64;
  r.cached_tokens = 16 * (i % 2);
  return r;
}

TEST(MetricsServerMetrics, LatencyBucketsAreR20From1msTo60s) {
  const std::vector<double> b = latency_buckets_seconds();
  ASSERT_EQ(b.size(), 97u);
  EXPECT_EQ(b.front(), 0.001);
  EXPECT_EQ(b.back(), 60.0);
  EXPECT_EQ(format_value(b[1]), "0.00112");
  EXPECT_EQ(format_value(b[20 + 7]), "0.0224");
  EXPECT_EQ(format_value(b[60 + 2]), "1.25");
  for (size_t i = 1; i < b.size(); ++i) {
    const double ratio = b[i] / b[i - 1];
    EXPECT_GE(ratio, 1.05) << i;
    EXPECT_LE(ratio, 1.15) << i;
  }
}

TEST(MetricsServerMetrics, RecordRequestUpdatesEveryFamily) {
  ServerMetrics metrics;
  for (int i = 0; i < 6; ++i) metrics.record_request(sample_record(i));
  RequestRecord failed = sample_record(99);
  failed.status = 400;
  failed.error = "bad request";
  failed.ttft_ms.reset();
  failed.itl_ms.clear();
  failed.completion_tokens = 0;
  metrics.record_request(failed);
  metrics.record_http_status(404);
  metrics.record_admission_rejection();
  metrics.set_num_requests_running(3);
  metrics.set_num_requests_waiting(7);
  metrics.set_kv_cache_usage(0.625);
  metrics.set_spec_propose(0.375, 12);
  metrics.set_spec_propose(0.25, 10);  // a stale, lower total never lowers a counter

  const auto families = parse_exposition(metrics.prometheus_text());
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"qwenserve_time_to_first_token_seconds", "histogram"},
      {"qwenserve_inter_token_latency_seconds", "histogram"},
      {"qwenserve_e2e_request_latency_seconds", "histogram"},
      {"qwenserve_request_queue_time_seconds", "histogram"},
      {"qwenserve_prompt_tokens_total", "counter"},
      {"qwenserve_generation_tokens_total", "counter"},
      {"qwenserve_request_success_total", "counter"},
      {"qwenserve_http_requests_total", "counter"},
      {"qwenserve_admission_rejections_total", "counter"},
      {"qwenserve_num_requests_running", "gauge"},
      {"qwenserve_num_requests_waiting", "gauge"},
      {"qwenserve_kv_cache_usage_perc", "gauge"},
      {"qwenserve_prefix_cache_queries_total", "counter"},
      {"qwenserve_prefix_cache_hits_total", "counter"},
      {"qwenserve_prefill_computed_tokens_total", "counter"},
      {"qwenserve_num_preemptions_total", "counter"},
      {"qwenserve_spec_draft_tokens_total", "counter"},
      {"qwenserve_spec_accepted_tokens_total", "counter"},
      {"qwenserve_spec_propose_seconds_total", "counter"},
      {"qwenserve_spec_propose_steps_total", "counter"},
      {"qwenserve_slo_requests_total", "counter"},
      {"qwenserve_slo_ttft_seconds", "gauge"},
      {"qwenserve_slo_itl_seconds", "gauge"},
      {"qwenserve_ttft_prediction_error_seconds", "histogram"},
      {"qwenserve_response_cache_requests_total", "counter"},
      {"qwenserve_response_cache_bytes", "gauge"},
      {"qwenserve_degraded", "gauge"},
      {"qwenserve_degraded_requests_total", "counter"},
      {"qwenserve_structured_output_requests_total", "counter"},
      {"qwenserve_grammar_compile_seconds", "histogram"}};
  ASSERT_EQ(families.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(families[i].name, expected[i].first);
    EXPECT_EQ(families[i].type, expected[i].second);
    EXPECT_FALSE(families[i].help.empty());
  }
  const ParsedHistogram ttft = check_histogram(families[0]);
  EXPECT_EQ(ttft.count, 6.0);
  EXPECT_DOUBLE_EQ(ttft.sum, (50 + 51 + 52 + 53 + 54 + 55) / 1000.0);
  EXPECT_EQ(check_histogram(families[1]).count, 18.0);  // every inter-token gap
  EXPECT_EQ(check_histogram(families[2]).count, 6.0);
  EXPECT_EQ(check_histogram(families[3]).count, 6.0);
  EXPECT_EQ(families[4].samples.at(0).value, 10 + 11 + 12 + 13 + 14 + 15 + 109);
  EXPECT_EQ(families[5].samples.at(0).value, 24.0);
  std::map<std::string, double> success, http;
  for (const auto& s : families[6].samples) success[s.labels.at("finished_reason")] = s.value;
  for (const auto& s : families[7].samples) http[s.labels.at("status")] = s.value;
  EXPECT_EQ(success, (std::map<std::string, double>{{"length", 2.0}, {"stop", 4.0}}));
  EXPECT_EQ(http, (std::map<std::string, double>{{"200", 6.0}, {"400", 1.0}, {"404", 1.0}}));
  EXPECT_EQ(families[8].samples.at(0).value, 1.0);
  EXPECT_EQ(families[9].samples.at(0).value, 3.0);
  EXPECT_EQ(families[10].samples.at(0).value, 7.0);
  EXPECT_EQ(families[11].samples.at(0).value, 0.625);
  // Prefix-cache queries count every prompt token (failed requests too), hits the cached ones.
  EXPECT_EQ(families[12].samples.at(0).value, families[4].samples.at(0).value);
  EXPECT_EQ(families[13].samples.at(0).value, 16 * 3 + 16);  // odd i of 0..5, and i = 99
  EXPECT_EQ(find_family(families, "qwenserve_spec_propose_seconds_total").samples.at(0).value, 0.375);
  EXPECT_EQ(find_family(families, "qwenserve_spec_propose_steps_total").samples.at(0).value, 12.0);

  const nlohmann::json stats = metrics.stats_json();
  EXPECT_EQ(stats["window_requests"]["requests"], 6);
  EXPECT_EQ(stats["running"], 3);
  EXPECT_EQ(stats["waiting"], 7);
  EXPECT_EQ(stats["kv_cache_usage"], 0.625);
}

/// The protocol info gauge and, with vllm_compat, every vLLM name: same type as its qwenserve
/// twin, the same sample values, model_name on every sample (none on vllm:cache_config_info).
TEST(MetricsServerMetrics, VllmCompatibleNamesMirrorTheirTwins) {
  ExportOptions options;
  options.vllm_compat = true;
  options.model_name = "qwen3-4b";
  options.kv_block_size = 16;
  options.kv_blocks = 1234;
  ServerMetrics metrics(steady_clock_now, {}, options);
  for (int i = 0; i < 5; ++i) metrics.record_request(sample_record(i));
  metrics.set_num_requests_running(2);
  metrics.set_num_requests_waiting(3);
  metrics.set_kv_cache_usage(0.5);
  const auto families = parse_exposition(metrics.prometheus_text());
  const ParsedFamily& info = find_family(families, "qwenserve_cache_config_info");
  EXPECT_EQ(info.type, "gauge");
  ASSERT_EQ(info.samples.size(), 1u);
  EXPECT_EQ(info.samples[0].labels, (std::map<std::string, std::string>{{"block_size", "16"}, {"num_gpu_blocks", "1234"}}));
  EXPECT_EQ(info.samples[0].value, 1);
  const ParsedFamily& vllm_info = find_family(families, "vllm:cache_config_info");
  EXPECT_EQ(vllm_info.type, "gauge");
  ASSERT_EQ(vllm_info.samples.size(), 1u);
  EXPECT_EQ(vllm_info.samples[0].labels, info.samples[0].labels);
  const std::vector<std::pair<std::string, std::string>> twins = {
      {"vllm:num_requests_running", "qwenserve_num_requests_running"},
      {"vllm:num_requests_waiting", "qwenserve_num_requests_waiting"},
      {"vllm:kv_cache_usage_perc", "qwenserve_kv_cache_usage_perc"},
      {"vllm:time_to_first_token_seconds", "qwenserve_time_to_first_token_seconds"},
      {"vllm:inter_token_latency_seconds", "qwenserve_inter_token_latency_seconds"},
      {"vllm:e2e_request_latency_seconds", "qwenserve_e2e_request_latency_seconds"},
      {"vllm:request_queue_time_seconds", "qwenserve_request_queue_time_seconds"},
      {"vllm:prompt_tokens_total", "qwenserve_prompt_tokens_total"},
      {"vllm:generation_tokens_total", "qwenserve_generation_tokens_total"},
      {"vllm:request_success_total", "qwenserve_request_success_total"},
      {"vllm:spec_decode_num_draft_tokens_total", "qwenserve_spec_draft_tokens_total"},
      {"vllm:spec_decode_num_accepted_tokens_total", "qwenserve_spec_accepted_tokens_total"}};
  for (const auto& [vllm_name, name] : twins) {
    const ParsedFamily& vllm = find_family(families, vllm_name);
    const ParsedFamily& ours = find_family(families, name);
    EXPECT_EQ(vllm.type, ours.type) << vllm_name;
    ASSERT_EQ(vllm.samples.size(), ours.samples.size()) << vllm_name;
    for (size_t i = 0; i < ours.samples.size(); ++i) {
      std::map<std::string, std::string> expected_labels = ours.samples[i].labels;
      expected_labels["model_name"] = "qwen3-4b";
      EXPECT_EQ(vllm.samples[i].name, vllm_name + ours.samples[i].name.substr(name.size())) << vllm_name;
      EXPECT_EQ(vllm.samples[i].labels, expected_labels) << vllm_name;
      EXPECT_EQ(vllm.samples[i].value, ours.samples[i].value) << vllm.samples[i].name;
    }
  }
  EXPECT_EQ(find_family(families, "vllm:num_requests_waiting").samples.at(0).value, 3);
  EXPECT_EQ(find_family(families, "vllm:request_success_total").samples.size(), 2u);  // length, stop
}

TEST(MetricsServerMetrics, DefaultExportHasNoVllmNamesAndNoUnknownCacheInfo) {
  ServerMetrics plain;
  for (const auto& family : parse_exposition(plain.prometheus_text())) {
    EXPECT_FALSE(family.name.starts_with("vllm:")) << family.name;
    EXPECT_NE(family.name, "qwenserve_cache_config_info");
  }
  ExportOptions options;
  options.kv_block_size = 16;
  options.kv_blocks = 8;
  ServerMetrics with_cache(steady_clock_now, {}, options);
  const auto families = parse_exposition(with_cache.prometheus_text());
  EXPECT_EQ(find_family(families, "qwenserve_cache_config_info").samples.at(0).labels.at("num_gpu_blocks"), "8");
  for (const auto& family : families) EXPECT_FALSE(family.name.starts_with("vllm:")) << family.name;
}

/// Writes example expositions (a fresh server, whose labeled families have no samples yet, and a
/// busy one) and, when promtool (Debian package `prometheus`) is on PATH, requires
/// `promtool check metrics` (parser plus lint; exit 3 on lint problems) to accept both.
TEST(MetricsServerMetrics, PromtoolAcceptsExposition) {
  ServerMetrics fresh;
  ServerMetrics busy;
  for (int i = 0; i < 20; ++i) busy.record_request(sample_record(i));
  busy.record_http_status(503);
  busy.record_admission_rejection();
  busy.set_kv_cache_usage(0.25);
  const std::vector<std::pair<std::string, const ServerMetrics*>> examples = {{"fresh", &fresh}, {"busy", &busy}};
  const bool have_promtool = std::system("command -v promtool > /dev/null 2>&1") == 0;
  for (const auto& [label, metrics] : examples) {
    const std::string path = ::testing::TempDir() + "qwenserve_metrics_" + label + ".prom";
    std::ofstream(path) << metrics->prometheus_text();
    EXPECT_NO_THROW(parse_exposition(metrics->prometheus_text())) << label;
    if (!have_promtool) continue;
    const std::string command = "promtool check metrics < '" + path + "'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
  }
  if (!have_promtool) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
}

// Issue 12's families: SLO attainment with two labels, the prediction error (signed buckets), the
// response cache and degradation, read back with the strict parser above.
TEST(ServerMetrics, SloCacheAndDegradationFamilies) {
  ServerMetrics metrics;
  metrics.set_slo(0.1, 0.02);
  RequestRecord r;
  r.status = 200;
  r.slo_ttft_ms = 100;
  r.slo_itl_ms = 20;
  r.ttft_ms = 50;
  r.predicted_ttft_ms = 80;    // error -30 ms
  r.itl_ms = {10, 20, 40};     // mean 23.3 ms > 20: missed
  r.cache = "miss";
  metrics.record_request(r);
  r.ttft_ms = 150;             // missed
  r.predicted_ttft_ms = 100;   // error +50 ms
  r.itl_ms = {10, 20};         // mean 15: met
  r.cache = "hit";
  r.degraded = true;
  metrics.record_request(r);
  metrics.set_response_cache_bytes(4096);
  metrics.set_degraded(true);
  std::map<std::string, double> slo, cache;
  std::map<std::string, ParsedFamily> by_name;
  for (const auto& f : parse_exposition(metrics.prometheus_text())) by_name[f.name] = f;
  for (const auto& s : by_name.at("qwenserve_slo_requests_total").samples) {
    slo[s.labels.at("slo") + "/" + s.labels.at("result")] = s.value;
  }
  EXPECT_EQ(slo, (std::map<std::string, double>{{"itl/met", 1}, {"itl/missed", 1}, {"ttft/met", 1}, {"ttft/missed", 1}}));
  for (const auto& s : by_name.at("qwenserve_response_cache_requests_total").samples) cache[s.labels.at("result")] = s.value;
  EXPECT_EQ(cache, (std::map<std::string, double>{{"bypass", 0}, {"hit", 1}, {"miss", 1}}));
  EXPECT_EQ(by_name.at("qwenserve_slo_ttft_seconds").samples.at(0).value, 0.1);
  EXPECT_EQ(by_name.at("qwenserve_slo_itl_seconds").samples.at(0).value, 0.02);
  EXPECT_EQ(by_name.at("qwenserve_response_cache_bytes").samples.at(0).value, 4096);
  EXPECT_EQ(by_name.at("qwenserve_degraded").samples.at(0).value, 1);
  EXPECT_EQ(by_name.at("qwenserve_degraded_requests_total").samples.at(0).value, 1);
  const ParsedHistogram error = check_histogram(by_name.at("qwenserve_ttft_prediction_error_seconds"));
  EXPECT_EQ(error.count, 2.0);
  EXPECT_NEAR(error.sum, -0.03 + 0.05, 1e-12);
}

// A 429 from SLO admission is a TTFT miss (README metrics table): goodput met / (met + missed)
// counts the requests turned away; it adds no ITL sample and no latency observation.
TEST(ServerMetrics, SloRejectionCountsAsTtftMissed) {
  ServerMetrics metrics;
  metrics.set_slo(0.1, 0.02);
  metrics.record_admission_rejection();
  metrics.record_slo_rejection();
  std::map<std::string, double> slo;
  std::map<std::string, ParsedFamily> by_name;
  for (const auto& f : parse_exposition(metrics.prometheus_text())) by_name[f.name] = f;
  for (const auto& s : by_name.at("qwenserve_slo_requests_total").samples) {
    slo[s.labels.at("slo") + "/" + s.labels.at("result")] = s.value;
  }
  EXPECT_EQ(slo, (std::map<std::string, double>{{"itl/met", 0}, {"itl/missed", 0}, {"ttft/met", 0}, {"ttft/missed", 1}}));
  EXPECT_EQ(by_name.at("qwenserve_admission_rejections_total").samples.at(0).value, 1);
  EXPECT_EQ(check_histogram(by_name.at("qwenserve_time_to_first_token_seconds")).count, 0.0);
  EXPECT_EQ(metrics.stats_json()["slo"]["ttft_missed"], 1);
}

}  // namespace
}  // namespace qs::metrics
