// Latency breakdown (server/latency_breakdown.h): Server-Timing parsed by a strict parser of the
// W3C Server Timing grammar (section 3; tokens and quoted-strings per RFC 7230 3.2.6) and compared
// with the request's JSON log line; the SLO Retry-After rule.
#include <gtest/gtest.h>

#include <cctype>
#include <map>
#include <string>

#include "metrics/request_log.h"
#include "server/latency_breakdown.h"
#include "server/slo_admission.h"

namespace qs {
namespace {

bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string("!#$%&'*+-.^_`|~").find(c) != std::string::npos;
}

// Server-Timing = #server-timing-metric
// server-timing-metric = metric-name *( OWS ";" OWS server-timing-param )
// server-timing-param = param-name OWS "=" OWS param-value; param-value = token / quoted-string
// Returns metric -> (param -> value); fails the test on any deviation.
std::map<std::string, std::map<std::string, std::string>> parse_server_timing(const std::string& h) {
  std::map<std::string, std::map<std::string, std::string>> out;
  size_t i = 0;
  auto ows = [&] { while (i < h.size() && (h[i] == ' ' || h[i] == '\t')) ++i; };
  auto token = [&] {
    const size_t start = i;
    while (i < h.size() && is_tchar(h[i])) ++i;
    EXPECT_GT(i, start) << "token expected at " << start << " in " << h;
    return h.substr(start, i - start);
  };
  for (;;) {
    ows();
    const std::string name = token();
    EXPECT_EQ(out.count(name), 0u) << "metric twice: " << name;
    auto& params = out[name];
    ows();
    while (i < h.size() && h[i] == ';') {
      ++i;
      ows();
      const std::string param = token();
      ows();
      EXPECT_TRUE(i < h.size() && h[i] == '=') << h;
      ++i;
      ows();
      std::string value;
      if (i < h.size() && h[i] == '"') {
        for (++i; i < h.size() && h[i] != '"'; ++i) value += h[i] == '\\' ? h[++i] : h[i];
        ++i;
      } else {
        value = token();
      }
      params[param] = value;
      ows();
    }
    if (i >= h.size()) break;
    EXPECT_EQ(h[i], ',') << "at " << i << " in " << h;
    if (h[i] != ',') break;
    ++i;
  }
  return out;
}

metrics::RequestRecord sample_record() {
  metrics::RequestRecord r;
  r.id = "chatcmpl-x";
  r.queue_ms = 12.25;
  r.ttft_ms = 40.5;
  r.prefill_ms = 28.25;
  r.decode_ms = 100.125;
  r.e2e_ms = 141.0;
  r.cached_tokens = 16;
  r.preemptions = 1;
  r.predicted_ttft_ms = 35.0;
  return r;
}

TEST(LatencyBreakdown, ServerTimingFollowsTheW3cGrammarAndMatchesTheLogLine) {
  const metrics::RequestRecord r = sample_record();
  const auto metrics = parse_server_timing(server_timing_header(r));
  const nlohmann::json log = nlohmann::json::parse(metrics::request_log_line(r));
  const std::map<std::string, std::string> durations = {
      {"queue", "queue_ms"}, {"prefill", "prefill_ms"}, {"decode", "decode_ms"}, {"total", "e2e_ms"},
      {"predicted_ttft", "predicted_ttft_ms"}};
  for (const auto& [metric, field] : durations) {
    ASSERT_TRUE(metrics.count(metric)) << metric;
    EXPECT_NEAR(std::stod(metrics.at(metric).at("dur")), log[field].get<double>(), 5e-4) << metric;
  }
  EXPECT_EQ(std::stoll(metrics.at("cached_tokens").at("desc")), log["cached_tokens"].get<int64_t>());
  EXPECT_EQ(std::stoll(metrics.at("preemptions").at("desc")), log["preemptions"].get<int64_t>());
  // The parts add up: queue + prefill = TTFT.
  EXPECT_NEAR(log["queue_ms"].get<double>() + log["prefill_ms"].get<double>(), log["ttft_ms"].get<double>(), 1e-9);
}

TEST(LatencyBreakdown, NoPredictionNoPredictedMetric) {
  metrics::RequestRecord r = sample_record();
  r.predicted_ttft_ms.reset();
  EXPECT_EQ(parse_server_timing(server_timing_header(r)).count("predicted_ttft"), 0u);
  EXPECT_TRUE(timings_json(r)["predicted_ttft_ms"].is_null());
}

TEST(LatencyBreakdown, TimingsObjectHasTheSameFigures) {
  const metrics::RequestRecord r = sample_record();
  const nlohmann::json t = timings_json(r);
  EXPECT_EQ(t["queue_ms"], 12.25);
  EXPECT_EQ(t["prefill_ms"], 28.25);
  EXPECT_EQ(t["decode_ms"], 100.125);
  EXPECT_EQ(t["total_ms"], 141.0);
  EXPECT_EQ(t["cached_tokens"], 16);
  EXPECT_EQ(t["preemptions"], 1);
  EXPECT_EQ(t["predicted_ttft_ms"], 35.0);
}

TEST(SloAdmission, RetryAfterIsTheCeilingOfTheExcessInSecondsAtLeastOne) {
  EXPECT_EQ(slo_retry_after_s(1100, 1000), 1);    // 0.1 s over: at least 1
  EXPECT_EQ(slo_retry_after_s(2500, 1000), 2);    // ceil(1.5)
  EXPECT_EQ(slo_retry_after_s(5000.5, 1000), 5);  // ceil(4.0005) = 5
  EXPECT_EQ(slo_retry_after_s(4000, 1000), 3);    // exactly 3 s over
}

TEST(SloAdmission, AnIdleEngineAdmitsWhateverThePredictionToReMeasureIt) {
  EXPECT_TRUE(slo_admits(5000, 1, 0, false));      // no SLO
  EXPECT_TRUE(slo_admits(999, 1, 1000, false));    // predicted within T
  EXPECT_TRUE(slo_admits(1000, 1, 1000, false));   // exactly T
  EXPECT_FALSE(slo_admits(1001, 1, 1000, false));  // over T with work ahead: 429
  // Locked out by inflated costs: an idle engine admits (its steps re-measure the costs) ...
  EXPECT_TRUE(slo_admits(60000, 1, 1000, true));
  // ... unless the time already spent preparing the request exceeds T by itself.
  EXPECT_FALSE(slo_admits(60000, 1000.5, 1000, true));
  EXPECT_FALSE(slo_admits(1, 0.002, 0.001, true));
}

TEST(SloAdmission, IdleMeansNothingRunningQueuedTakenOrIncoming) {
  LoadSnapshot load;
  EXPECT_TRUE(engine_idle(load));
  load.costs = StepCosts(4);  // learned costs do not matter
  EXPECT_TRUE(engine_idle(load));
  LoadSnapshot running = load;
  running.running.push_back({});
  EXPECT_FALSE(engine_idle(running));
  LoadSnapshot waiting = load;
  waiting.waiting.push_back({});
  EXPECT_FALSE(engine_idle(waiting));
  LoadSnapshot taken = load;
  taken.taken.sequences = 1;
  EXPECT_FALSE(engine_idle(taken));
  LoadSnapshot incoming = load;
  incoming.incoming.sequences = 2;  // submitted, or another request being admitted
  EXPECT_FALSE(engine_idle(incoming));
}

}  // namespace
}  // namespace qs
