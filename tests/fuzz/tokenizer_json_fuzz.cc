// tokenizer.json loader (load_tokenizer_json) and the Tokenizer built from what it accepts, on
// arbitrary bytes (seeds: small valid tokenizer.json files).
// Invariants: bad input only throws qs::Error; a tokenizer that builds encodes a few fixed texts to
// ids inside its vocabulary and decodes them (and every single id) to valid UTF-8.
#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

using qs::fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qs::fuzz::write_scratch_file("tokenizer.json", data, size);
  std::optional<qs::Tokenizer> tokenizer;
  try {
    tokenizer.emplace(qs::load_tokenizer_json(path));
  } catch (const qs::Error&) {
    return 0;
  }
  for (const char* text : {"Hello, world!", " \xc3\xa9t\xc3\xa9 123 <|im_start|>user\n", "\xff\xfe", ""}) {
    const std::vector<int32_t> ids = tokenizer->encode(text);
    for (int32_t id : ids) check(id >= 0 && id < tokenizer->vocab_size(), "encode gave an id outside the vocabulary");
    check(qs::fuzz::is_valid_utf8(tokenizer->decode(ids)), "decode gave invalid UTF-8");
    check(qs::fuzz::is_valid_utf8(tokenizer->decode(ids, true)), "decode(skip_special) gave invalid UTF-8");
  }
  const int32_t n = std::min<int32_t>(tokenizer->vocab_size(), 512);
  for (int32_t id = 0; id < n; ++id) {
    const int32_t one[1] = {id};
    check(qs::fuzz::is_valid_utf8(tokenizer->decode(one)), "decode of one id gave invalid UTF-8");
  }
  try {
    const int32_t bad[1] = {tokenizer->vocab_size()};
    (void)tokenizer->decode(bad);
    qs::fuzz::fail("decode accepted an id outside the vocabulary");
  } catch (const qs::Error&) {
  }
  return 0;
}
