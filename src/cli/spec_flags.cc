#include "cli/spec_flags.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace qs::cli {
namespace {

int32_t int_field(const nlohmann::json& config, const char* name, int32_t fallback, int32_t lo, int32_t hi) {
  if (!config.contains(name) || config[name].is_null()) return fallback;
  const nlohmann::json& v = config[name];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    throw Error("--speculative-config: " + std::string(name) + " must be an integer from " + std::to_string(lo) +
                " to " + std::to_string(hi) + " (got " + v.dump() + ")");
  }
  return v.get<int32_t>();
}

}  // namespace

void SpecFlags::add_to(CLI::App& command) {
  command.add_option("--spec-ngram", ngram,
                     "Speculative decoding by n-gram prompt lookup: draft from the prompt and output so far, "
                     "matching keys of up to N tokens (0: off)")
      ->check(CLI::Range(0, kMaxDraftTokens))->capture_default_str();
  command.add_option("--draft-max", draft_max, "Draft tokens verified per step at most (with --spec-ngram)")
      ->check(CLI::Range(1, kMaxDraftTokens))->capture_default_str();
  command.add_option("--speculative-config", speculative_config,
                     "vLLM-style JSON, e.g. {\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":3}");
}

SpecDecodeOptions SpecFlags::resolve() const {
  SpecDecodeOptions spec;
  if (speculative_config.empty()) {
    if (ngram > 0) {
      spec.ngram_max = ngram;
      spec.draft_max = draft_max;
    }
    return spec;
  }
  if (ngram > 0) throw Error("give either --spec-ngram or --speculative-config, not both");
  const nlohmann::json config = nlohmann::json::parse(speculative_config, nullptr, false);
  if (config.is_discarded() || !config.is_object()) throw Error("--speculative-config: not a JSON object");
  std::string method = "ngram";
  if (config.contains("method")) {
    if (!config["method"].is_string()) throw Error("--speculative-config: method must be a string");
    method = config["method"].get<std::string>();
  }
  if (method != "ngram") {
    throw Error("--speculative-config: method '" + method + "' is not supported (only \"ngram\"; a draft model is not implemented)");
  }
  spec.draft_max = int_field(config, "num_speculative_tokens", draft_max, 1, kMaxDraftTokens);
  spec.ngram_max = int_field(config, "prompt_lookup_max", 3, 1, kMaxDraftTokens);
  spec.ngram_min = int_field(config, "prompt_lookup_min", 1, 1, spec.ngram_max);
  return spec;
}

}  // namespace qs::cli
