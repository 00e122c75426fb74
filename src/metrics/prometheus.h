// Minimal Prometheus metric primitives and a registry that writes the text exposition format 0.0.4.
//
// Format reference: https://prometheus.io/docs/instrumenting/exposition_formats/ ("Text-based
// format"). Every family is written as
//   # HELP <name> <help, with \ and newline escaped as \\ and \n>
//   # TYPE <name> counter|gauge|histogram
//   <name>{<label>="<value, with \ " newline escaped as \\ \" \n>"} <value>
// and histograms as cumulative `<name>_bucket{le="<bound>"}` samples ending with le="+Inf",
// followed by `<name>_sum` and `<name>_count`.
//
// Cost model: Counter, Gauge and Histogram updates are lock-free (relaxed atomics), so the engine
// thread never waits on an exposition in progress. LabeledCounter takes a shared (reader) lock to
// find the child for a label value; only the first use of a new value takes the writer lock.
// Registration and exposition share one registry mutex that updates never touch.
//
// Constant labels (LabelSet) are written first on every sample of a family, e.g.
// `vllm:num_requests_waiting{model_name="qwen3"} 0` or `..._bucket{model_name="qwen3",le="0.1"} 3`.
// An alias (add_alias) writes an already registered family a second time under another name: one
// update, two names, so a compatibility name costs exposition bytes but nothing on the hot path.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qs::metrics {

/// HTTP Content-Type of the text exposition format written by MetricsRegistry.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

/// Formats a sample value so that Prometheus (Go strconv.ParseFloat) reads back the same double:
/// "+Inf", "-Inf", "NaN"; integral values below 2^53 in magnitude as plain integers ("1000000",
/// never "1e+06"); other values in 1e-6 <= |v| < 1e15 as the shortest round-trip fixed notation
/// ("0.00112"); anything else as the shortest round-trip scientific notation ("1.5e-09").
std::string format_value(double value);

/// Escapes a label value: backslash -> \\, double quote -> \", newline -> \n.
std::string escape_label_value(std::string_view value);

/// Constant labels of a family as (name, value) pairs, written in this order.
using LabelSet = std::vector<std::pair<std::string, std::string>>;

/// Escapes HELP text: backslash -> \\, newline -> \n.
std::string escape_help(std::string_view help);

/// A monotonically increasing integer count (requests, tokens).
class Counter {
 public:
  void inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

/// A family of counters distinguished by the value of one label (e.g. status="200").
class LabeledCounter {
 public:
  explicit LabeledCounter(std::string label_name, std::string second_label_name = {})
      : label_name_(std::move(label_name)), second_label_name_(std::move(second_label_name)) {}

  /// The child counter for `label_value`, created at zero on first use. The reference stays valid
  /// for the lifetime of this object, so hot paths may cache it.
  Counter& with(std::string_view label_value);
  /// The child for (`label_value`, `second_value`) of a family with two labels.
  Counter& with(std::string_view label_value, std::string_view second_value);

  /// Current value for `label_value`; 0 when the child was never created.
  std::uint64_t value(std::string_view label_value) const;

  const std::string& label_name() const { return label_name_; }

  /// Appends `<name>{<const_labels>,<label>="<value>"} <count>` lines sorted by label value;
  /// `const_labels` is rendered (`a="x",b="y"`) or empty.
  void append_samples(std::string& out, const std::string& name, std::string_view const_labels = {}) const;

 private:
  std::string label_name_;
  std::string second_label_name_;  // empty: one label; else children are keyed "v1\x1fv2"
  mutable std::shared_mutex mutex_;
  std::map<std::string, std::unique_ptr<Counter>, std::less<>> children_;
};

/// A counter whose value is a running total kept elsewhere and copied in at exposition time
/// (e.g. seconds the engine thread spent in one activity, read from the engine's statistics):
/// written with TYPE counter and a real value; set() never lowers it, so it stays monotonic.
class TotalCounter {
 public:
  void set(double total) {
    double seen = value_.load(std::memory_order_relaxed);
    while (total > seen && !value_.compare_exchange_weak(seen, total, std::memory_order_relaxed)) {
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// A value that can go up and down (queue depth, cache usage).
class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

/// Point-in-time copy of a histogram, with cumulative bucket counts.
struct HistogramSnapshot {
  std::vector<double> upper_bounds;               ///< finite bounds, strictly increasing
  std::vector<std::uint64_t> cumulative_counts;   ///< one per bound plus a final +Inf entry
  double sum = 0.0;                               ///< sum of all observed values
  std::uint64_t count() const { return cumulative_counts.back(); }
};

/// Fixed-bucket histogram. Bucket i counts observations v with v <= upper_bounds[i] (and, for
/// i > 0, v > upper_bounds[i-1]); the implicit last bucket counts v > upper_bounds.back().
class Histogram {
 public:
  /// `upper_bounds` must be finite, strictly increasing and non-empty; throws qs::Error otherwise.
  explicit Histogram(std::vector<double> upper_bounds);

  /// Records one observation: a binary search plus two relaxed atomic adds, no lock. NaN is
  /// ignored (it would poison _sum for the lifetime of the process).
  void observe(double value);

  /// Consistent-enough snapshot for exposition: _count is derived from the bucket counts, so the
  /// +Inf bucket always equals _count even under concurrent observes; _sum may lag by the
  /// observations in flight.
  HistogramSnapshot snapshot() const;

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> bucket_counts_;  // size upper_bounds_.size() + 1
  std::atomic<double> sum_{0.0};
};

/// Owns metric families and writes them in registration order. Names must match
/// [a-zA-Z_:][a-zA-Z0-9_:]* and be unique; label names must match [a-zA-Z_][a-zA-Z0-9_]*, must not
/// start with "__" and must not be "le" (nor repeat within a family). Violations throw qs::Error.
/// Returned references stay valid for the registry's lifetime.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& add_counter(const std::string& name, const std::string& help);
  TotalCounter& add_total_counter(const std::string& name, const std::string& help);
  LabeledCounter& add_labeled_counter(const std::string& name, const std::string& help,
                                      const std::string& label_name, const std::string& second_label_name = {});
  /// A gauge; `const_labels` (e.g. an info metric's {{"block_size", "16"}}) go on its one sample.
  Gauge& add_gauge(const std::string& name, const std::string& help, const LabelSet& const_labels = {});
  Histogram& add_histogram(const std::string& name, const std::string& help,
                           std::vector<double> upper_bounds);

  /// Writes the family registered as `target` again under `name` with HELP `help`, its type, and
  /// `const_labels` after the target's own constant labels on every sample. Throws qs::Error when
  /// `target` is not registered or is itself an alias.
  void add_alias(const std::string& name, const std::string& help, const std::string& target,
                 const LabelSet& const_labels = {});

  /// The whole exposition, every line terminated by '\n'.
  std::string expose_text() const;

 private:
  struct Family;  // name, help and one metric; defined in prometheus.cc
  Family& add_family(const std::string& name, const std::string& help, const LabelSet& const_labels);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Family>> families_;
};

}  // namespace qs::metrics
