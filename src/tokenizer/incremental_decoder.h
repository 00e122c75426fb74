// Streaming detokenizer: turns token ids into text one id at a time without ever emitting part
// of a UTF-8 character, e.g. for server-sent events while a model generates.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace qs {

class IncrementalDecoder {
 public:
  /// `tokenizer` must outlive the decoder. With `skip_special`, special added tokens produce no
  /// text (as Tokenizer::decode(ids, true)).
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  /// Adds one token and returns the text that became complete: always valid UTF-8, possibly
  /// empty. Bytes that cannot start or continue a character are emitted as U+FFFD right away; a
  /// trailing incomplete character (at most 3 bytes) is held back. Throws qs::Error when `id`
  /// is outside the vocabulary (the decoder is left unchanged).
  std::string feed(int32_t id);

  /// Returns the held-back bytes, an incomplete character becoming U+FFFD, and empties the
  /// buffer. The concatenation of every feed() and the final flush() equals
  /// Tokenizer::decode(all ids, skip_special).
  std::string flush();

  /// Drops held-back bytes so the decoder can start a new stream.
  void reset() { pending_.clear(); }

  /// Number of bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace qs
