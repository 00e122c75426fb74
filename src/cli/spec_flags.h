// Command-line flags of speculative decoding, shared by `generate`, `serve` and `bench`:
//   --spec-ngram N            n-gram prompt lookup with keys of up to N tokens (llama.cpp's
//                             lookup decoding; vLLM's prompt_lookup_max)
//   --draft-max K             drafts per step at most (llama.cpp's name; vLLM's
//                             num_speculative_tokens), default 4
//   --speculative-config JSON vLLM's form: {"method": "ngram", "num_speculative_tokens": K,
//                             "prompt_lookup_max": N, "prompt_lookup_min": M}
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/ngram_proposer.h"

namespace qs::cli {

struct SpecFlags {
  int32_t ngram = 0;
  int32_t draft_max = 4;
  std::string speculative_config;

  /// Adds the three flags to `command`.
  void add_to(CLI::App& command);
  /// The options the flags ask for (off when neither --spec-ngram nor --speculative-config is
  /// given). Throws qs::Error for an unparsable --speculative-config, a method other than
  /// "ngram", numbers out of range, or both forms at once.
  SpecDecodeOptions resolve() const;
};

}  // namespace qs::cli
