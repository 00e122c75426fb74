// Whether a draft model can propose tokens for a target model: drafts are token ids, verified by
// the target as its own ids, so both must mean the same thing by every id.
#pragma once

#include <string>

#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace qs {

/// Throws qs::Error naming both files and the first difference found when the draft model
/// (`draft_path`) cannot draft for the target (`target_path`): logits rows (vocab_size) differ,
/// tokenizer sizes differ, a token id is spelled differently (the id and both spellings), a
/// token is special in one tokenizer only, or the EOS ids differ. Returns when they match.
void check_draft_model_compatible(const std::string& target_path, const ModelConfig& target_config,
                                  const Tokenizer& target_tokenizer, const std::string& draft_path,
                                  const ModelConfig& draft_config, const Tokenizer& draft_tokenizer);

}  // namespace qs
