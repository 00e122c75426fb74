#include "metrics/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <type_traits>
#include <variant>

#include "core/error.h"

namespace qs::metrics {

namespace {

bool is_name_start(char c, bool allow_colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
}

bool is_name_char(char c, bool allow_colon) {
  return is_name_start(c, allow_colon) || (c >= '0' && c <= '9');
}

/// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; label names: [a-zA-Z_][a-zA-Z0-9_]*.
bool is_valid_name(std::string_view name, bool allow_colon) {
  if (name.empty() || !is_name_start(name[0], allow_colon)) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return is_name_char(c, allow_colon); });
}

void validate_label_name(const std::string& metric, const std::string& label) {
  if (!is_valid_name(label, false) || label.starts_with("__") || label == "le") {
    throw Error("metric '" + metric + "': invalid label name '" + label + "'");
  }
}

void append_sample(std::string& out, std::string_view name, std::string_view labels, std::string_view value) {
  out.append(name);
  if (!labels.empty()) {
    out.push_back('{');
    out.append(labels);
    out.push_back('}');
  }
  out.push_back(' ');
  out.append(value);
  out.push_back('\n');
}

std::string label_pair(std::string_view label, std::string_view value) {
  return std::string(label) + "=\"" + escape_label_value(value) + "\"";
}

/// `a,b` of two rendered label lists, either of which may be empty.
std::string join_labels(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  std::string out(a);
  out.push_back(',');
  out.append(b);
  return out;
}

void append_histogram(std::string& out, const std::string& name, const Histogram& histogram,
                      std::string_view const_labels) {
  const HistogramSnapshot snap = histogram.snapshot();
  const std::string bucket_name = name + "_bucket";
  for (size_t i = 0; i < snap.upper_bounds.size(); ++i) {
    append_sample(out, bucket_name, join_labels(const_labels, label_pair("le", format_value(snap.upper_bounds[i]))),
                  std::to_string(snap.cumulative_counts[i]));
  }
  append_sample(out, bucket_name, join_labels(const_labels, label_pair("le", "+Inf")), std::to_string(snap.count()));
  append_sample(out, name + "_sum", const_labels, format_value(snap.sum));
  append_sample(out, name + "_count", const_labels, std::to_string(snap.count()));
}

/// Renders `const_labels` as `a="x",b="y"` after checking each name (and that none repeats one
/// of `taken`, which grows by the names checked).
std::string render_const_labels(const std::string& metric, const LabelSet& const_labels,
                                std::vector<std::string>& taken) {
  std::string out;
  for (const auto& [label, value] : const_labels) {
    validate_label_name(metric, label);
    if (std::find(taken.begin(), taken.end(), label) != taken.end()) {
      throw Error("metric '" + metric + "': label '" + label + "' given twice");
    }
    taken.push_back(label);
    out = join_labels(out, label_pair(label, value));
  }
  return out;
}

}  // namespace

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53
  if (std::fabs(value) < kMaxExactInteger && value == std::trunc(value)) {
    return std::to_string(static_cast<std::int64_t>(value));
  }
  const double magnitude = std::fabs(value);
  const auto format = (magnitude >= 1e-6 && magnitude < 1e15) ? std::chars_format::fixed
                                                              : std::chars_format::scientific;
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, format);
  return std::string(buffer, result.ptr);
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

// ---- LabeledCounter ----

Counter& LabeledCounter::with(std::string_view label_value) {
  {
    std::shared_lock lock(mutex_);
    auto it = children_.find(label_value);
    if (it != children_.end()) return *it->second;
  }
  std::unique_lock lock(mutex_);
  auto [it, inserted] = children_.try_emplace(std::string(label_value), nullptr);
  if (inserted) it->second = std::make_unique<Counter>();
  return *it->second;
}

Counter& LabeledCounter::with(std::string_view label_value, std::string_view second_value) {
  return with(std::string(label_value) + '\x1f' + std::string(second_value));
}

std::uint64_t LabeledCounter::value(std::string_view label_value) const {
  std::shared_lock lock(mutex_);
  auto it = children_.find(label_value);
  return it == children_.end() ? 0 : it->second->value();
}

void LabeledCounter::append_samples(std::string& out, const std::string& name,
                                    std::string_view const_labels) const {
  std::shared_lock lock(mutex_);
  for (const auto& [label_value, counter] : children_) {
    std::string labels = label_pair(label_name_, label_value);
    if (!second_label_name_.empty()) {
      const size_t cut = label_value.find('\x1f');
      labels = join_labels(label_pair(label_name_, std::string_view(label_value).substr(0, cut)),
                           label_pair(second_label_name_, std::string_view(label_value).substr(cut + 1)));
    }
    append_sample(out, name, join_labels(const_labels, labels), std::to_string(counter->value()));
  }
}

// ---- Histogram ----

Histogram::Histogram(std::vector<double> upper_bounds) : upper_bounds_(std::move(upper_bounds)) {
  if (upper_bounds_.empty()) throw Error("histogram needs at least one finite bucket bound");
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    if (!std::isfinite(upper_bounds_[i])) throw Error("histogram bucket bounds must be finite");
    if (i > 0 && !(upper_bounds_[i] > upper_bounds_[i - 1])) {
      throw Error("histogram bucket bounds must be strictly increasing");
    }
  }
  bucket_counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(upper_bounds_.size() + 1);
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;
  // First bound >= value, i.e. the bucket with value <= le; past the end means the +Inf bucket.
  const auto it = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  const auto index = static_cast<size_t>(it - upper_bounds_.begin());
  bucket_counts_[index].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot snap;
  snap.upper_bounds = upper_bounds_;
  snap.cumulative_counts.resize(upper_bounds_.size() + 1);
  std::uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += bucket_counts_[i].load(std::memory_order_relaxed);
    snap.cumulative_counts[i] = running;
  }
  snap.sum = sum_.load(std::memory_order_relaxed);
  return snap;
}

// ---- MetricsRegistry ----

struct MetricsRegistry::Family {
  std::string name;
  std::string help;
  std::string const_labels;            // rendered, written first on every sample
  std::vector<std::string> label_names;  // constant labels and a LabeledCounter's label
  std::variant<std::monostate, std::unique_ptr<Counter>, std::unique_ptr<LabeledCounter>,
               std::unique_ptr<Gauge>, std::unique_ptr<Histogram>, std::unique_ptr<TotalCounter>>
      metric;
  const Family* alias_of = nullptr;  // an alias writes this family's metric under its own name

  const Family& source() const { return alias_of != nullptr ? *alias_of : *this; }

  const char* type_name() const {
    const auto& m = source().metric;
    if (std::holds_alternative<std::unique_ptr<Gauge>>(m)) return "gauge";
    if (std::holds_alternative<std::unique_ptr<Histogram>>(m)) return "histogram";
    return "counter";
  }

  void append(std::string& out) const {
    out += "# HELP " + name + " " + escape_help(help) + "\n";
    out += "# TYPE " + name + " " + type_name() + "\n";
    const std::string labels = alias_of != nullptr ? join_labels(alias_of->const_labels, const_labels) : const_labels;
    std::visit(
        [&](const auto& m) {
          using T = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<T, std::unique_ptr<Counter>>) {
            append_sample(out, name, labels, std::to_string(m->value()));
          } else if constexpr (std::is_same_v<T, std::unique_ptr<LabeledCounter>>) {
            m->append_samples(out, name, labels);
          } else if constexpr (std::is_same_v<T, std::unique_ptr<Gauge>> || std::is_same_v<T, std::unique_ptr<TotalCounter>>) {
            append_sample(out, name, labels, format_value(m->value()));
          } else if constexpr (std::is_same_v<T, std::unique_ptr<Histogram>>) {
            append_histogram(out, name, *m, labels);
          }
        },
        source().metric);
  }
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Family& MetricsRegistry::add_family(const std::string& name, const std::string& help,
                                                     const LabelSet& const_labels) {
  if (!is_valid_name(name, true)) throw Error("invalid metric name '" + name + "'");
  for (const auto& family : families_) {
    if (family->name == name) throw Error("metric '" + name + "' registered twice");
  }
  auto family = std::make_unique<Family>();
  family->name = name;
  family->help = help;
  family->const_labels = render_const_labels(name, const_labels, family->label_names);
  families_.push_back(std::move(family));
  return *families_.back();
}

Counter& MetricsRegistry::add_counter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  auto counter = std::make_unique<Counter>();
  Counter& ref = *counter;
  add_family(name, help, {}).metric = std::move(counter);
  return ref;
}

TotalCounter& MetricsRegistry::add_total_counter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mutex_);
  auto counter = std::make_unique<TotalCounter>();
  TotalCounter& ref = *counter;
  add_family(name, help, {}).metric = std::move(counter);
  return ref;
}

LabeledCounter& MetricsRegistry::add_labeled_counter(const std::string& name, const std::string& help,
                                                     const std::string& label_name,
                                                     const std::string& second_label_name) {
  validate_label_name(name, label_name);
  if (!second_label_name.empty()) validate_label_name(name, second_label_name);
  std::lock_guard lock(mutex_);
  auto counter = std::make_unique<LabeledCounter>(label_name, second_label_name);
  LabeledCounter& ref = *counter;
  Family& family = add_family(name, help, {});
  family.label_names.push_back(label_name);
  if (!second_label_name.empty()) family.label_names.push_back(second_label_name);
  family.metric = std::move(counter);
  return ref;
}

Gauge& MetricsRegistry::add_gauge(const std::string& name, const std::string& help, const LabelSet& const_labels) {
  std::lock_guard lock(mutex_);
  auto gauge = std::make_unique<Gauge>();
  Gauge& ref = *gauge;
  add_family(name, help, const_labels).metric = std::move(gauge);
  return ref;
}

Histogram& MetricsRegistry::add_histogram(const std::string& name, const std::string& help,
                                          std::vector<double> upper_bounds) {
  auto histogram = std::make_unique<Histogram>(std::move(upper_bounds));
  std::lock_guard lock(mutex_);
  Histogram& ref = *histogram;
  add_family(name, help, {}).metric = std::move(histogram);
  return ref;
}

void MetricsRegistry::add_alias(const std::string& name, const std::string& help, const std::string& target,
                                const LabelSet& const_labels) {
  std::lock_guard lock(mutex_);
  const Family* source = nullptr;
  for (const auto& family : families_) {
    if (family->name == target) source = family.get();
  }
  if (source == nullptr) throw Error("alias '" + name + "': no metric '" + target + "'");
  if (source->alias_of != nullptr) throw Error("alias '" + name + "': '" + target + "' is itself an alias");
  std::vector<std::string> taken = source->label_names;
  const std::string labels = render_const_labels(name, const_labels, taken);
  Family& family = add_family(name, help, {});
  family.const_labels = labels;
  family.label_names = std::move(taken);
  family.alias_of = source;
}

std::string MetricsRegistry::expose_text() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& family : families_) family->append(out);
  return out;
}

}  // namespace qs::metrics
