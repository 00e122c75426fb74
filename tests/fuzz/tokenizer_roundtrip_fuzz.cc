// Encode/decode round trip of the real Qwen3 tokenizer on arbitrary text, and the streaming
// detokenizer on arbitrary ids.
//
// What the tokenizer promises (tokenizer.h): invalid UTF-8 is replaced by U+FFFD, added tokens are
// matched verbatim, the text between them is NFC-normalized, and byte-level BPE loses nothing.
// Invariants checked:
//  - every id is inside the vocabulary; decode gives valid UTF-8;
//  - NFC(decode(encode(s))) == NFC(s) for valid UTF-8 s (NFC per segment between added tokens is
//    canonically equivalent to s), and decode(encode(s)) == NFC(s) exactly when s contains no
//    added token's text (NFC by utf8proc directly, not through the tokenizer);
//  - for any bytes: t = decode(encode(s)) is a fixed point, decode(encode(t)) == t;
//  - IncrementalDecoder fed the ids one at a time, then flushed, equals decode(ids).
#include <fuzzer/FuzzedDataProvider.h>
#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

using qs::fuzz::check;

std::string nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) qs::fuzz::fail("utf8proc rejected valid UTF-8");
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

bool contains_added_token(const std::string& s) {
  static const std::vector<std::string> literals = [] {
    std::vector<std::string> out;
    const qs::Tokenizer& tok = qs::fuzz::qwen3_tokenizer();
    for (int32_t id = 151643; id < tok.vocab_size(); ++id) out.push_back(tok.token_bytes(id));
    return out;
  }();
  for (const std::string& literal : literals) {
    if (!literal.empty() && s.find(literal) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  qs::fuzz::load_qwen3();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const qs::Tokenizer& tok = qs::fuzz::qwen3_tokenizer();
  FuzzedDataProvider in(data, size);
  const bool text_mode = in.ConsumeBool();
  if (text_mode) {
    const std::string s = in.ConsumeRemainingBytesAsString();
    const std::vector<int32_t> ids = tok.encode(s);
    for (int32_t id : ids) check(id >= 0 && id < tok.vocab_size(), "encode gave an id outside the vocabulary");
    const std::string t = tok.decode(ids);
    check(qs::fuzz::is_valid_utf8(t), "decode gave invalid UTF-8");
    if (qs::fuzz::is_valid_utf8(s)) {
      const std::string expected = nfc(s);
      check(nfc(t) == expected, "NFC(decode(encode(s))) != NFC(s)");
      if (!contains_added_token(s)) check(t == expected, "decode(encode(s)) != NFC(s) for text without added tokens");
    }
    check(tok.decode(tok.encode(t)) == t, "decode(encode(t)) != t for t = decode(encode(s))");
    return 0;
  }
  // Arbitrary ids through the streaming decoder.
  std::vector<int32_t> ids;
  while (in.remaining_bytes() >= 4 && ids.size() < 256) ids.push_back(in.ConsumeIntegralInRange<int32_t>(0, tok.vocab_size() - 1));
  const bool skip_special = in.ConsumeBool();
  qs::IncrementalDecoder decoder(tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = decoder.feed(id);
    check(qs::fuzz::is_valid_utf8(piece), "IncrementalDecoder::feed gave invalid UTF-8");
    check(decoder.pending_bytes() <= 3, "IncrementalDecoder holds more than 3 bytes");
    streamed += piece;
  }
  streamed += decoder.flush();
  check(streamed == tok.decode(ids, skip_special), "streamed text != decode(ids)");
  return 0;
}
