#include "engine/draft_model_check.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace qs {
namespace {

// A token's bytes as a JSON string literal (invalid UTF-8 replaced), for the error message.
std::string quoted(const std::string& bytes) {
  return nlohmann::json(bytes).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string id_text(const std::optional<int32_t>& id) { return id ? std::to_string(*id) : std::string("none"); }

}  // namespace

void check_draft_model_compatible(const std::string& target_path, const ModelConfig& target_config,
                                  const Tokenizer& target_tokenizer, const std::string& draft_path,
                                  const ModelConfig& draft_config, const Tokenizer& draft_tokenizer) {
  const std::string both = "the draft model " + draft_path + " cannot draft for the target model " + target_path + ": ";
  if (draft_config.vocab_size != target_config.vocab_size) {
    throw Error(both + "vocabulary sizes (logits rows) differ: draft " + std::to_string(draft_config.vocab_size) +
                ", target " + std::to_string(target_config.vocab_size));
  }
  if (draft_tokenizer.vocab_size() != target_tokenizer.vocab_size()) {
    throw Error(both + "tokenizers differ in size: draft " + std::to_string(draft_tokenizer.vocab_size()) +
                " tokens, target " + std::to_string(target_tokenizer.vocab_size()));
  }
  for (int32_t id = 0; id < target_tokenizer.vocab_size(); ++id) {
    const std::string t = target_tokenizer.token_bytes(id);
    const std::string d = draft_tokenizer.token_bytes(id);
    if (t != d) {
      throw Error(both + "tokenizers differ at token id " + std::to_string(id) + ": draft " + quoted(d) +
                  ", target " + quoted(t));
    }
    if (target_tokenizer.is_special(id) != draft_tokenizer.is_special(id)) {
      throw Error(both + "token id " + std::to_string(id) + " (" + quoted(t) + ") is special in the " +
                  (target_tokenizer.is_special(id) ? "target" : "draft") + " tokenizer only");
    }
  }
  if (draft_tokenizer.eos_id() != target_tokenizer.eos_id()) {
    throw Error(both + "EOS ids differ: draft " + id_text(draft_tokenizer.eos_id()) + ", target " +
                id_text(target_tokenizer.eos_id()));
  }
}

}  // namespace qs
