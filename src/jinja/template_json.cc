// The tojson serialization of the reference (JSON.stringify rules for scalars, Python-like
// separators and indentation for containers).
#include <algorithm>
#include <cmath>

#include "jinja/template_error.h"
#include "jinja/template_text.h"
#include "jinja/template_value.h"

namespace qs::chat {
namespace {

constexpr int kMaxJsonDepth = 1000;

// Approximates String.prototype.localeCompare (ICU root collation) for sort_keys: punctuation
// before digits before letters, letters case-insensitively, lower case first on ties.
int collation_rank(unsigned char c) {
  if (c >= '0' && c <= '9') return 1000 + c;
  if (c >= 'a' && c <= 'z') return 2000 + 2 * (c - 'a');
  if (c >= 'A' && c <= 'Z') return 2000 + 2 * (c - 'A');
  return c;
}

int locale_compare(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const int ra = collation_rank(static_cast<unsigned char>(a[i]));
    const int rb = collation_rank(static_cast<unsigned char>(b[i]));
    if (ra != rb) return ra < rb ? -1 : 1;
  }
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a == b ? 0 : (a > b ? -1 : 1);  // lower case sorts first among case variants
}

struct Separators {
  std::string item;
  std::string key;
};

Separators json_separators(const JsonOptions& options) {
  if (options.separators) return {options.separators->first, options.separators->second};
  if (options.indent && *options.indent != 0) return {",", ": "};
  return {", ", ": "};
}

void write_json(const Value& value, const JsonOptions& options, bool undefined_as_null, int depth,
                std::string& out);

void write_json_container(const Value& value, const JsonOptions& options, bool undefined_as_null,
                          int depth, std::string& out) {
  const Separators sep = json_separators(options);
  const int indent = options.indent.value_or(0);
  if (indent < 0) throw TemplateError("tojson indent must not be negative");
  const std::string unit(static_cast<size_t>(indent), ' ');
  std::string base = "\n";
  for (int i = 0; i < depth; ++i) base += unit;
  const std::string child = base + unit;
  const bool pretty = indent != 0;
  if (value.is_array()) {
    const Array& items = value.items();
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += sep.item;
      if (pretty) out += child;
      write_json(items[i], options, undefined_as_null, depth + 1, out);
    }
    if (pretty && !items.empty()) out += base;
    out += ']';
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& entry : value.fields().entries()) entries.push_back(&entry);
  if (options.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
      return locale_compare(a->first, b->first) < 0;
    });
  }
  out += '{';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += sep.item;
    if (pretty) out += child;
    out += text::json_quote(entries[i]->first, options.ensure_ascii) + sep.key;
    write_json(entries[i]->second, options, undefined_as_null, depth + 1, out);
  }
  if (pretty && !entries.empty()) out += base;
  out += '}';
}

void write_json(const Value& value, const JsonOptions& options, bool undefined_as_null, int depth,
                std::string& out) {
  if (depth > kMaxJsonDepth) throw TemplateError("value is nested too deeply to convert to JSON");
  switch (value.kind()) {
    case ValueKind::kNull: out += "null"; return;
    case ValueKind::kUndefined: out += undefined_as_null ? "null" : "undefined"; return;
    case ValueKind::kBool: out += value.bool_value() ? "true" : "false"; return;
    case ValueKind::kInt:
    case ValueKind::kFloat:
      out += std::isfinite(value.number()) ? text::format_js_number(value.number()) : "null";
      return;
    case ValueKind::kString: out += text::json_quote(value.str(), options.ensure_ascii); return;
    case ValueKind::kArray:
      if (value.is_tuple()) break;  // the reference has no JSON form for tuples
      [[fallthrough]];
    case ValueKind::kObject:
    case ValueKind::kNamespace:
      write_json_container(value, options, undefined_as_null, depth, out);
      return;
    case ValueKind::kFunction: break;
  }
  throw TemplateError(std::string("Cannot convert to JSON: ") + value.type_name());
}

}  // namespace

std::string to_json(const Value& value, const JsonOptions& options, bool undefined_as_null) {
  std::string out;
  write_json(value, options, undefined_as_null, 0, out);
  return out;
}

}  // namespace qs::chat
