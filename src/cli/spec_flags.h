// Command-line flags of speculative decoding, shared by `generate`, `serve` and `bench`:
//   --spec-ngram N            n-gram prompt lookup with keys of up to N tokens (llama.cpp's
//                             lookup decoding; vLLM's prompt_lookup_max)
//   --draft-max K             drafts per step at most (llama.cpp's name; vLLM's
//                             num_speculative_tokens), default 4
//   --model-draft PATH        a draft model (llama-server's flag): a smaller GGUF / HF model with
//                             the target's tokenizer, run on its own CPU backend
//   --speculative-config JSON vLLM's form: {"method": "ngram", "num_speculative_tokens": K,
//                             "prompt_lookup_max": N, "prompt_lookup_min": M}, or
//                             {"model": PATH, "num_speculative_tokens": K} (method "draft_model")
//   --no-spec-adaptive        verify K drafts per step whenever the source has them; by default
//                             (--spec-adaptive) only as many of the K as pay off, per sequence and
//                             step, from the sequence's acceptance so far and the learned step
//                             costs (engine/draft_length.h)
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/ngram_proposer.h"

namespace qs::cli {

struct SpecFlags {
  int32_t ngram = 0;
  int32_t draft_max = 4;
  std::string model_draft;
  std::string speculative_config;
  bool adaptive = true;
  CLI::Option* adaptive_option = nullptr;  // to tell an explicit --spec-adaptive from the default

  /// Adds the five flags to `command`.
  void add_to(CLI::App& command);
  /// The options the flags ask for (off when none of --spec-ngram, --model-draft and
  /// --speculative-config is given). With a draft model, its path goes to `draft_model_path`.
  /// Throws qs::Error for an unparsable --speculative-config, a method other than "ngram" or
  /// "draft_model", numbers out of range, two draft sources at once, a draft model asked of a
  /// command that passes no `draft_model_path`, or an explicit --spec-adaptive without a draft
  /// source.
  SpecDecodeOptions resolve(std::string* draft_model_path = nullptr) const;
};

}  // namespace qs::cli
