// tokenizer_data_from_gguf: the tokenizer.ggml.* arrays llama.cpp's convert_hf_to_gguf.py writes
// for byte-level BPE vocabularies (tokenizer.ggml.model "gpt2"). Tokens are spelled as in the HF
// vocabulary (byte-level) except added tokens, which are stored as their literal content with
// token type CONTROL (special) or USER_DEFINED; ids missing from HF are "[PAD<id>]" UNUSED.
#include <string>

#include "core/error.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace qs {
namespace {

enum GgufTokenType : int64_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

std::pair<std::string, std::string> split_merge(const std::string& merge, size_t index) {
  const size_t space = merge.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
      merge.find(' ', space + 1) != std::string::npos) {
    throw Error("gguf tokenizer: tokenizer.ggml.merges[" + std::to_string(index) + "] '" + merge +
                "' is not two tokens separated by one space");
  }
  return {merge.substr(0, space), merge.substr(space + 1)};
}

}  // namespace

TokenizerData tokenizer_data_from_gguf(std::vector<std::string> tokens,
                                       std::vector<std::string> merges,
                                       std::vector<int64_t> token_types,
                                       std::optional<int32_t> bos, std::optional<int32_t> eos,
                                       std::optional<int32_t> pad) {
  if (!token_types.empty() && token_types.size() != tokens.size()) {
    throw Error("gguf tokenizer: tokenizer.ggml.token_type has " +
                std::to_string(token_types.size()) + " entries for " +
                std::to_string(tokens.size()) + " tokens");
  }
  TokenizerData data;
  data.vocab.resize(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int64_t type = token_types.empty() ? kNormal : token_types[id];
    switch (type) {
      case kNormal: case kUnknown: case kByte:
        data.vocab[id] = std::move(tokens[id]);
        break;
      case kControl: case kUserDefined:
        data.added_tokens.push_back(
            AddedToken{static_cast<int32_t>(id), std::move(tokens[id]), type == kControl});
        break;
      case kUnused:
        break;
      default:
        throw Error("gguf tokenizer: token " + std::to_string(id) + " has unknown token type " +
                    std::to_string(type));
    }
  }
  data.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) data.merges.push_back(split_merge(merges[i], i));
  const std::pair<std::optional<int32_t>, const char*> specials[] = {
      {bos, "bos"}, {eos, "eos"}, {pad, "pad"}};
  for (const auto& [id, what] : specials) {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= tokens.size())) {
      throw Error(std::string("gguf tokenizer: ") + what + " id " + std::to_string(*id) +
                  " outside the vocabulary (size " + std::to_string(tokens.size()) + ")");
    }
  }
  data.bos_id = bos;
  data.eos_id = eos;
  data.pad_id = pad;
  data.split_regex = std::string(tokenizer_detail::kQwen2SplitRegex);
  data.normalize_nfc = true;
  return data;
}

}  // namespace qs
