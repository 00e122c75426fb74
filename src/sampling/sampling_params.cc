#include "sampling/sampling_params.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace qs {
namespace {

std::string format_number(double value) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return buf;
}

[[noreturn]] void fail(const std::string& field, const std::string& range, double value) {
  throw Error("sampling parameter " + field + " must be " + range + " (got " +
              format_number(value) + ")");
}

// Written as !(lo <= v && v <= hi) so that NaN fails too.
void check_closed(const char* field, float value, double lo, double hi) {
  if (!(lo <= value && value <= hi)) {
    fail(field, "in [" + format_number(lo) + ", " + format_number(hi) + "]", value);
  }
}

}  // namespace

void validate(const SamplingParams& params, int32_t vocab_size) {
  if (vocab_size <= 0) {
    throw Error("sampling: vocab_size must be > 0 (got " + std::to_string(vocab_size) + ")");
  }
  if (!(params.temperature >= 0.0f) || !std::isfinite(params.temperature)) {
    fail("temperature", "a finite number >= 0", params.temperature);
  }
  if (!(params.top_p > 0.0f && params.top_p <= 1.0f)) {
    fail("top_p", "in (0, 1]", params.top_p);
  }
  check_closed("min_p", params.min_p, 0.0, 1.0);
  if (!(params.repetition_penalty > 0.0f) || !std::isfinite(params.repetition_penalty)) {
    fail("repetition_penalty", "a finite number > 0", params.repetition_penalty);
  }
  check_closed("presence_penalty", params.presence_penalty, -2.0, 2.0);
  check_closed("frequency_penalty", params.frequency_penalty, -2.0, 2.0);
  for (const auto& [token, bias] : params.logit_bias) {
    if (token < 0 || token >= vocab_size) {
      throw Error("sampling parameter logit_bias: token id " + std::to_string(token) +
                  " must be in [0, " + std::to_string(vocab_size) + ")");
    }
    if (!(bias >= -100.0f && bias <= 100.0f) && bias != kSuppressLogitBias) {
      fail("logit_bias[" + std::to_string(token) + "]", "in [-100, 100]", bias);
    }
  }
}

}  // namespace qs
