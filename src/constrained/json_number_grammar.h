// JSON numbers as grammar alternatives: integers in an exact range, bounded decimals, and the
// unbounded JSON number.
//
// Magnitudes are capped at kMaxMagnitude (15 digits) so every generated value is an exact IEEE
// double; an unbounded side of a range means "up to the cap".
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "constrained/grammar.h"

namespace qs::constrained {

constexpr int64_t kMaxMagnitude = 999'999'999'999'999;

/// Decimal spellings (no leading zeros, "-" for negatives, never "-0") of the integers in
/// [lo, hi]; empty when lo > hi. |lo|, |hi| <= kMaxMagnitude.
std::vector<Sequence> integer_range(GrammarBuilder& b, int64_t lo, int64_t hi);

/// Numbers x with lo <= x <= hi (or < / > when exclusive; nullopt = unbounded): the integers of
/// the range, plus decimals I.F whose fraction F has no trailing zero, for the integer parts I
/// where every such decimal stays inside the range (no exponents). Empty when nothing fits.
std::vector<Sequence> bounded_number(GrammarBuilder& b, std::optional<double> lo, bool lo_exclusive,
                                     std::optional<double> hi, bool hi_exclusive);

/// Any JSON number: -?(0|[1-9][0-9]{0,14})(.[0-9]+)?([eE][-+]?[0-9]{1,2})?
Sequence any_number(GrammarBuilder& b);

}  // namespace qs::constrained
