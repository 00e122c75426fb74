// Range checks for numeric command-line options with readable messages. CLI11's PositiveNumber /
// NonNegativeNumber print their bounds as 300-digit numbers ("Value 0 not in range 0.000000 to
// 1797693...") and misstate the positive bound.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

namespace qs::cli {

namespace detail {
/// "" when `text` parses fully as a number satisfying `ok`, else the message.
template <typename Ok>
std::string check_number(const std::string& text, Ok ok, const char* requirement) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
  if (!ok(value)) return "must be " + std::string(requirement) + " (got " + text + ")";
  return "";
}
}  // namespace detail

/// Accepts numbers > 0.
inline const CLI::Validator kPositive(
    [](std::string& text) { return detail::check_number(text, [](double v) { return v > 0; }, "> 0"); }, "> 0",
    "POSITIVE");
/// Accepts numbers >= 0.
inline const CLI::Validator kNonNegative(
    [](std::string& text) { return detail::check_number(text, [](double v) { return v >= 0; }, ">= 0"); }, ">= 0",
    "NONNEGATIVE");

}  // namespace qs::cli
