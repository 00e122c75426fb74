#include "metrics/rolling_window.h"

#include <algorithm>

namespace qs::metrics {

namespace {

using Clock = std::chrono::steady_clock;
using SecondsF = std::chrono::duration<double>;

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json view_json(const WindowView& view) {
  return {{"requests", view.requests},
          {"generation_tokens", view.generation_tokens},
          {"ttft_ms", summary_json(view.ttft_ms)},
          {"itl_ms", summary_json(view.itl_ms)},
          {"e2e_ms", summary_json(view.e2e_ms)}};
}

}  // namespace

Clock::time_point steady_clock_now() { return Clock::now(); }

nlohmann::json summary_json(const LatencySummary& summary) {
  return {{"count", summary.count},        {"mean", optional_json(summary.mean)},
          {"p50", optional_json(summary.p50)}, {"p90", optional_json(summary.p90)},
          {"p95", optional_json(summary.p95)}, {"p99", optional_json(summary.p99)},
          {"max", optional_json(summary.max)}};
}

void RollingWindow::RawView::append(const Sample& sample) {
  ++requests;
  generation_tokens += sample.generation_tokens;
  if (sample.ttft_ms) ttft_ms.push_back(*sample.ttft_ms);
  itl_ms.insert(itl_ms.end(), sample.itl_ms.begin(), sample.itl_ms.end());
  e2e_ms.push_back(sample.e2e_ms);
}

RollingWindow::RollingWindow(SteadyClockFn clock, RollingWindowOptions options)
    : clock_(std::move(clock)), options_(options), created_at_(clock_()) {}

void RollingWindow::add(const RequestRecord& record) {
  Sample sample{clock_(), record.ttft_ms, record.itl_ms, record.e2e_ms,
                std::max<std::int64_t>(record.completion_tokens, 0)};
  std::lock_guard lock(mutex_);
  samples_.push_back(std::move(sample));
  prune_locked(samples_.back().finished_at);
}

void RollingWindow::prune_locked(Clock::time_point now) {
  while (samples_.size() > options_.max_retained) samples_.pop_front();
  // A sample may go once it is in neither view: older than max_requests samples and than W.
  while (samples_.size() > options_.max_requests && now - samples_.front().finished_at > options_.time_window) {
    samples_.pop_front();
  }
}

RollingWindow::RawView RollingWindow::collect_last_requests_locked() const {
  RawView raw;
  const size_t n = std::min(samples_.size(), options_.max_requests);
  for (auto it = samples_.end() - static_cast<std::ptrdiff_t>(n); it != samples_.end(); ++it) raw.append(*it);
  return raw;
}

RollingWindow::RawView RollingWindow::collect_time_window_locked(Clock::time_point now) const {
  RawView raw;
  // Samples are in finish order, so the window is a suffix: age = now - finished_at <= W.
  auto first = samples_.end();
  while (first != samples_.begin() && now - (first - 1)->finished_at <= options_.time_window) --first;
  for (auto it = first; it != samples_.end(); ++it) raw.append(*it);
  return raw;
}

double RollingWindow::rate_seconds(Clock::time_point now) const {
  const double window_s = SecondsF(options_.time_window).count();
  const double uptime_s = SecondsF(now - created_at_).count();
  return std::max(1.0, std::min(window_s, uptime_s));
}

WindowView RollingWindow::summarize_view(RawView raw) {
  WindowView view;
  view.requests = raw.requests;
  view.generation_tokens = raw.generation_tokens;
  view.ttft_ms = summarize(std::move(raw.ttft_ms));
  view.itl_ms = summarize(std::move(raw.itl_ms));
  view.e2e_ms = summarize(std::move(raw.e2e_ms));
  return view;
}

WindowView RollingWindow::last_requests_view() const {
  RawView raw;
  {
    std::lock_guard lock(mutex_);
    raw = collect_last_requests_locked();
  }
  return summarize_view(std::move(raw));
}

WindowView RollingWindow::time_window_view() const {
  const Clock::time_point now = clock_();
  RawView raw;
  {
    std::lock_guard lock(mutex_);
    raw = collect_time_window_locked(now);
  }
  return summarize_view(std::move(raw));
}

double RollingWindow::requests_per_second() const {
  const Clock::time_point now = clock_();
  std::lock_guard lock(mutex_);
  size_t requests = 0;
  for (auto it = samples_.rbegin(); it != samples_.rend() && now - it->finished_at <= options_.time_window; ++it) {
    ++requests;
  }
  return static_cast<double>(requests) / rate_seconds(now);
}

double RollingWindow::generation_tokens_per_second() const {
  const Clock::time_point now = clock_();
  std::lock_guard lock(mutex_);
  std::int64_t tokens = 0;
  for (auto it = samples_.rbegin(); it != samples_.rend() && now - it->finished_at <= options_.time_window; ++it) {
    tokens += it->generation_tokens;
  }
  return static_cast<double>(tokens) / rate_seconds(now);
}

nlohmann::json RollingWindow::stats_json() const {
  const Clock::time_point now = clock_();
  RawView by_count;
  RawView by_time;
  {
    std::lock_guard lock(mutex_);
    by_count = collect_last_requests_locked();
    by_time = collect_time_window_locked(now);
  }
  const double seconds = rate_seconds(now);
  const double requests_per_s = static_cast<double>(by_time.requests) / seconds;
  const double tokens_per_s = static_cast<double>(by_time.generation_tokens) / seconds;
  nlohmann::json window_requests = view_json(summarize_view(std::move(by_count)));
  window_requests["max_requests"] = options_.max_requests;
  nlohmann::json window_time = view_json(summarize_view(std::move(by_time)));
  window_time["window_seconds"] = SecondsF(options_.time_window).count();
  return {{"window_requests", std::move(window_requests)},
          {"window_60s", std::move(window_time)},
          {"requests_per_second", requests_per_s},
          {"generation_tokens_per_second", tokens_per_s}};
}

}  // namespace qs::metrics
