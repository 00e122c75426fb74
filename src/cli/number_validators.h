// Range checks for numeric command-line options with readable messages. CLI11's PositiveNumber /
// NonNegativeNumber print their bounds as 300-digit numbers ("Value 0 not in range 0.000000 to
// 1797693...") and misstate the positive bound.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
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

/// Accepts a decimal integer 0..2^64-1 (an RNG seed); CLI11 would wrap -1 and clamp larger
/// values silently.
inline const CLI::Validator kSeed(
    [](std::string& text) -> std::string {
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
        return "must be an integer from 0 to 18446744073709551615 (got " + text + ")";
      }
      errno = 0;
      std::strtoull(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return "must be at most 18446744073709551615 (got " + text + ")";
      return "";
    },
    "0..2^64-1", "SEED");

}  // namespace qs::cli
