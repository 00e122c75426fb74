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
  command.add_option("--model-draft", model_draft,
                     "Speculative decoding with a draft model: a smaller GGUF / HF model with the same tokenizer "
                     "(e.g. Qwen3-0.6B for Qwen3-8B), on its own CPU backend and KV cache (greedy requests: argmax drafts; "
                     "sampled ones: drafts drawn from its own distribution, verified by rejection sampling)");
  command.add_option("--draft-max", draft_max, "Draft tokens verified per step at most (with --spec-ngram or --model-draft)")
      ->check(CLI::Range(1, kMaxDraftTokens))->capture_default_str();
  command.add_option("--speculative-config", speculative_config,
                     "vLLM-style JSON, e.g. {\"method\":\"ngram\",\"num_speculative_tokens\":4,\"prompt_lookup_max\":3} "
                     "or {\"model\":\"draft.gguf\",\"num_speculative_tokens\":4}");
  adaptive_option =
      command.add_flag("--spec-adaptive,!--no-spec-adaptive", adaptive,
                       "Per sequence and step, verify only as many drafts (up to --draft-max) as pay off, from the "
                       "sequence's acceptance rate so far and the learned cost of a step (default; "
                       "--no-spec-adaptive: always --draft-max when the source has that many)");
}

SpecDecodeOptions SpecFlags::resolve(std::string* draft_model_path) const {
  SpecDecodeOptions spec;
  std::string draft_path;
  if (speculative_config.empty()) {
    if (ngram > 0 && !model_draft.empty()) throw Error("give either --spec-ngram or --model-draft, not both");
    if (ngram > 0) {
      spec.ngram_max = ngram;
      spec.draft_max = draft_max;
    } else if (!model_draft.empty()) {
      spec.draft_model = true;
      spec.draft_max = draft_max;
      draft_path = model_draft;
    }
  } else {
    if (ngram > 0 || !model_draft.empty()) {
      throw Error("give either --speculative-config or --spec-ngram / --model-draft, not both");
    }
    const nlohmann::json config = nlohmann::json::parse(speculative_config, nullptr, false);
    if (config.is_discarded() || !config.is_object()) throw Error("--speculative-config: not a JSON object");
    const bool has_model = config.contains("model") && !config["model"].is_null();
    std::string method = has_model ? "draft_model" : "ngram";
    if (config.contains("method") && !config["method"].is_null()) {
      if (!config["method"].is_string()) throw Error("--speculative-config: method must be a string");
      method = config["method"].get<std::string>();
    }
    spec.draft_max = int_field(config, "num_speculative_tokens", draft_max, 1, kMaxDraftTokens);
    if (method == "ngram") {
      if (has_model) throw Error("--speculative-config: \"model\" is for method \"draft_model\", not \"ngram\"");
      spec.ngram_max = int_field(config, "prompt_lookup_max", 3, 1, kMaxDraftTokens);
      spec.ngram_min = int_field(config, "prompt_lookup_min", 1, 1, spec.ngram_max);
    } else if (method == "draft_model") {
      if (!has_model || !config["model"].is_string() || config["model"].get<std::string>().empty()) {
        throw Error("--speculative-config: method \"draft_model\" needs \"model\": the draft model's path");
      }
      spec.draft_model = true;
      draft_path = config["model"].get<std::string>();
    } else {
      throw Error("--speculative-config: method '" + method + "' is not supported (\"ngram\" or \"draft_model\")");
    }
  }
  if (adaptive && adaptive_option != nullptr && adaptive_option->count() > 0 && !spec.enabled()) {
    throw Error("--spec-adaptive chooses how many drafts to verify: give a draft source too (--spec-ngram, "
                "--model-draft or --speculative-config)");
  }
  spec.adaptive = adaptive && spec.enabled();
  if (spec.draft_model) {
    if (draft_model_path == nullptr) throw Error("a draft model (--model-draft) is not supported by this command");
    *draft_model_path = draft_path;
  }
  return spec;
}

}  // namespace qs::cli
