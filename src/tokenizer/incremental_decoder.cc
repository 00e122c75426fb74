#include "tokenizer/incremental_decoder.h"

#include "tokenizer/utf8.h"

namespace qs {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string IncrementalDecoder::feed(int32_t id) {
  std::string bytes = tokenizer_->token_bytes(id);  // throws before any state changes
  if (skip_special_ && tokenizer_->is_special(id)) return {};
  pending_ += bytes;
  std::string out;
  const size_t consumed = tokenizer_detail::utf8_append_lossy(pending_, /*final=*/false, out);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  tokenizer_detail::utf8_append_lossy(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace qs
