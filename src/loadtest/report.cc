#include "loadtest/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <map>

#include "loadtest/statistics.h"

namespace qs::loadtest {
namespace {

nlohmann::ordered_json summary_json(const Summary& s) {
  nlohmann::ordered_json j;
  j["mean"] = s.mean;  // NaN dumps as null
  j["p50"] = s.p50;
  j["p90"] = s.p90;
  j["p95"] = s.p95;
  j["p99"] = s.p99;
  j["max"] = s.max;
  return j;
}

nlohmann::ordered_json level_value(double level) {
  if (std::isinf(level)) return "inf";
  if (level == std::floor(level) && std::abs(level) < 1e15) return static_cast<long long>(level);
  return level;
}

double max_itl(const RequestRecord& r) {
  double m = 0;
  for (double v : r.itl_ms) m = std::max(m, v);
  return m;
}

}  // namespace

SloOptions slo_from_metrics(const std::string& text) {
  SloOptions slo;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    for (const auto& [name, target] : {std::pair<std::string, std::optional<double>*>{"qwenserve_slo_ttft_seconds ", &slo.ttft_ms},
                                       {"qwenserve_slo_itl_seconds ", &slo.itl_ms}}) {
      if (line.rfind(name, 0) != 0) continue;
      char* parsed_end = nullptr;
      const double seconds = std::strtod(line.c_str() + name.size(), &parsed_end);
      if (parsed_end != line.c_str() + name.size() && std::isfinite(seconds) && seconds > 0) *target = seconds * 1000.0;
    }
  }
  return slo;
}

bool meets_slo(const RequestRecord& r, const SloOptions& slo) {
  if (!r.ok()) return false;
  if (slo.ttft_ms && !(r.ttft_ms <= *slo.ttft_ms)) return false;  // NaN TTFT fails
  if (slo.itl_ms && max_itl(r) > *slo.itl_ms) return false;
  return true;
}

nlohmann::ordered_json level_json(const LevelResult& level, const SloOptions& slo) {
  std::vector<double> ttft, tpot, itl, e2e;
  std::vector<double> rejected_e2e, server_queue, server_prefill, server_decode, prediction_error, prediction_error_rel;
  std::map<int, std::vector<double>> ttft_by_turn;
  std::map<std::string, size_t> errors;
  size_t completed = 0, good = 0;
  long long output_tokens = 0, prompt_tokens = 0;
  for (const RequestRecord& r : level.records) {
    if (!r.ok()) {
      ++errors[r.status];
      if (r.status == "429") rejected_e2e.push_back(r.e2e_ms);
      continue;
    }
    if (!std::isnan(r.server_queue_ms)) server_queue.push_back(r.server_queue_ms);
    if (!std::isnan(r.server_prefill_ms)) server_prefill.push_back(r.server_prefill_ms);
    if (!std::isnan(r.server_decode_ms)) server_decode.push_back(r.server_decode_ms);
    if (!std::isnan(r.server_predicted_ttft_ms) && !std::isnan(r.server_queue_ms) && !std::isnan(r.server_prefill_ms)) {
      // Server-measured TTFT (queue + prefill) minus the admission's prediction.
      const double measured = r.server_queue_ms + r.server_prefill_ms;
      prediction_error.push_back(measured - r.server_predicted_ttft_ms);
      // Relative to the prediction (the issue's +-25% target): (measured - predicted) / predicted.
      if (r.server_predicted_ttft_ms > 0) {
        prediction_error_rel.push_back((measured - r.server_predicted_ttft_ms) / r.server_predicted_ttft_ms);
      }
    }
    ++completed;
    if (meets_slo(r, slo)) ++good;
    output_tokens += r.output_tokens;
    if (r.prompt_tokens > 0) prompt_tokens += r.prompt_tokens;
    e2e.push_back(r.e2e_ms);
    if (!std::isnan(r.ttft_ms)) {
      ttft.push_back(r.ttft_ms);
      ttft_by_turn[r.turn].push_back(r.ttft_ms);
      if (r.output_tokens > 1) tpot.push_back((r.e2e_ms - r.ttft_ms) / (r.output_tokens - 1));
    }
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
  }
  const double d = level.duration_s > 0 ? level.duration_s : std::nan("");
  nlohmann::ordered_json j;
  if (level.closed_loop) {
    j["concurrency"] = level_value(level.level);
  } else {
    j["request_rate"] = level_value(level.level);
    j["burstiness"] = level.burstiness;
  }
  j["num_requests"] = level.records.size();
  j["completed"] = completed;
  j["errors"] = nlohmann::ordered_json::object();
  for (const auto& [status, count] : errors) j["errors"][status] = count;
  j["duration_s"] = level.duration_s;
  j["total_input_tokens"] = prompt_tokens;
  j["total_output_tokens"] = output_tokens;
  j["request_throughput"] = static_cast<double>(completed) / d;
  j["output_throughput"] = static_cast<double>(output_tokens) / d;
  j["goodput"] = static_cast<double>(good) / d;
  // Share of all sent requests that met the SLO (a 429 or any other failure does not).
  j["slo_attainment"] = level.records.empty() ? 0.0 : static_cast<double>(good) / static_cast<double>(level.records.size());
  j["ttft_ms"] = summary_json(summarize(ttft));
  j["tpot_ms"] = summary_json(summarize(tpot));
  j["itl_ms"] = summary_json(summarize(itl));
  j["e2e_ms"] = summary_json(summarize(e2e));
  j["rejected_429"] = rejected_e2e.size();
  j["rejected_429_share"] = level.records.empty() ? 0.0 : static_cast<double>(rejected_e2e.size()) / static_cast<double>(level.records.size());
  j["rejected_429_e2e_ms"] = summary_json(summarize(rejected_e2e));
  if (!server_queue.empty()) {
    // The breakdown the server reports (qwenserve's "timings"), and its TTFT prediction error.
    j["server_queue_ms"] = summary_json(summarize(server_queue));
    j["server_prefill_ms"] = summary_json(summarize(server_prefill));
    j["server_decode_ms"] = summary_json(summarize(server_decode));
    std::sort(prediction_error.begin(), prediction_error.end());
    nlohmann::ordered_json pe;
    pe["count"] = prediction_error.size();
    for (const auto& [name, q] : {std::pair<const char*, double>{"p10", 10.0}, {"p50", 50.0}, {"p90", 90.0}}) {
      pe[name] = prediction_error.empty() ? nlohmann::ordered_json(nullptr)
                                          : nlohmann::ordered_json(percentile_sorted(prediction_error, q));
    }
    j["ttft_prediction_error_ms"] = pe;
    std::sort(prediction_error_rel.begin(), prediction_error_rel.end());
    nlohmann::ordered_json rel;
    rel["count"] = prediction_error_rel.size();
    for (const auto& [name, q] : {std::pair<const char*, double>{"p10", 10.0}, {"p50", 50.0}, {"p90", 90.0}}) {
      rel[name] = prediction_error_rel.empty() ? nlohmann::ordered_json(nullptr)
                                               : nlohmann::ordered_json(percentile_sorted(prediction_error_rel, q));
    }
    const auto within = std::count_if(prediction_error_rel.begin(), prediction_error_rel.end(),
                                      [](double e) { return std::abs(e) <= 0.25; });
    rel["within_25pct"] = prediction_error_rel.empty() ? nlohmann::ordered_json(nullptr)
                                                       : nlohmann::ordered_json(static_cast<double>(within) / static_cast<double>(prediction_error_rel.size()));
    j["ttft_prediction_error_rel"] = rel;
  }
  if (level.turns_per_user > 1) {
    nlohmann::ordered_json by_turn = nlohmann::ordered_json::object();
    for (auto& [turn, values] : ttft_by_turn) {
      by_turn[std::to_string(turn)] = summary_json(summarize(std::move(values)));
    }
    j["ttft_ms_by_turn"] = by_turn;
  }
  return j;
}

nlohmann::ordered_json record_json(const RequestRecord& r, const LevelResult& level) {
  nlohmann::ordered_json j;
  if (level.closed_loop) {
    j["concurrency"] = level_value(level.level);
  } else {
    j["request_rate"] = level_value(level.level);
  }
  j["conversation"] = r.conversation;
  j["turn"] = r.turn;
  j["start_s"] = r.start_s;
  j["ttft_ms"] = r.ttft_ms;
  j["itl_ms"] = r.itl_ms;
  j["e2e_ms"] = r.e2e_ms;
  j["output_tokens"] = r.output_tokens;
  j["prompt_tokens"] = r.prompt_tokens;
  j["content_chunks"] = r.content_chunks;
  j["max_tokens"] = r.max_tokens;
  j["finish_reason"] = r.finish_reason;
  j["status"] = r.status;
  j["error"] = r.error;
  return j;
}

namespace {

std::string num(const nlohmann::ordered_json& v, const char* fmt = "%.2f") {
  if (v.is_null() || (v.is_number_float() && !std::isfinite(v.get<double>()))) return "-";
  if (v.is_string()) return v.get<std::string>();
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v.get<double>());
  return buf;
}

void summary_row(std::string& out, const std::string& name, const nlohmann::ordered_json& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-14s %9s %9s %9s %9s %9s %9s\n", name.c_str(),
                num(s["mean"]).c_str(), num(s["p50"]).c_str(), num(s["p90"]).c_str(),
                num(s["p95"]).c_str(), num(s["p99"]).c_str(), num(s["max"]).c_str());
  out += buf;
}

}  // namespace

std::string format_level(const nlohmann::ordered_json& j) {
  std::string out;
  const bool closed = j.contains("concurrency");
  const std::string title = closed ? "concurrency " + num(j["concurrency"], "%g")
                                   : "request rate " + num(j["request_rate"], "%g") + " req/s";
  out += "==================== " + title + " ====================\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "completed %s/%s   errors %s   duration %s s\n",
                j["completed"].dump().c_str(), j["num_requests"].dump().c_str(),
                j["errors"].dump().c_str(), num(j["duration_s"]).c_str());
  out += buf;
  std::snprintf(buf, sizeof buf,
                "request throughput %s req/s   output throughput %s tokens/s   goodput %s req/s\n",
                num(j["request_throughput"]).c_str(), num(j["output_throughput"]).c_str(),
                num(j["goodput"]).c_str());
  out += buf;
  std::snprintf(buf, sizeof buf, "slo attainment %s   429 share %s\n", num(j["slo_attainment"], "%.3f").c_str(),
                num(j["rejected_429_share"], "%.3f").c_str());
  out += buf;
  if (j["completed"] == 0) {  // no latency was measured: no table of empty statistics
    out += "no request completed: no latency figures\n";
    return out;
  }
  std::snprintf(buf, sizeof buf, "%-14s %9s %9s %9s %9s %9s %9s\n", "(ms)", "mean", "p50", "p90",
                "p95", "p99", "max");
  out += buf;
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) summary_row(out, key, j[key]);
  if (j.value("rejected_429", 0) > 0) summary_row(out, "429 e2e", j["rejected_429_e2e_ms"]);
  if (j.contains("server_queue_ms")) {
    for (const char* key : {"server_queue_ms", "server_prefill_ms", "server_decode_ms"}) summary_row(out, key, j[key]);
    const auto& pe = j["ttft_prediction_error_ms"];
    std::snprintf(buf, sizeof buf, "ttft prediction error (measured - predicted, ms): p10 %s  p50 %s  p90 %s\n",
                  num(pe["p10"]).c_str(), num(pe["p50"]).c_str(), num(pe["p90"]).c_str());
    out += buf;
    const auto& rel = j["ttft_prediction_error_rel"];
    std::snprintf(buf, sizeof buf, "ttft prediction error / predicted: p10 %s  p50 %s  p90 %s  within +-25%%: %s\n",
                  num(rel["p10"], "%+.3f").c_str(), num(rel["p50"], "%+.3f").c_str(), num(rel["p90"], "%+.3f").c_str(),
                  num(rel["within_25pct"], "%.3f").c_str());
    out += buf;
  }
  if (j.contains("ttft_ms_by_turn")) {
    for (const auto& [turn, s] : j["ttft_ms_by_turn"].items()) summary_row(out, "ttft turn " + turn, s);
  }
  return out;
}

}  // namespace qs::loadtest
