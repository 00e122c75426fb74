// UTF-8 helpers for the tokenizer: lossy decoding, validation and NFC normalization.
//
// Invalid bytes are replaced by U+FFFD following the Unicode "maximal subpart" practice (Unicode
// Standard ch. 3, Table 3-7 well-formed sequences), which is what Rust's String::from_utf8_lossy
// and the WHATWG TextDecoder do, i.e. Hugging Face's errors='replace' decoding.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qs::tokenizer_detail {

/// Appends the lossy decoding of `bytes` to `out` and returns how many bytes were consumed. When
/// `final` is false, a trailing proper prefix of a well-formed sequence (at most 3 bytes, which
/// later bytes could still complete) is left unconsumed; when true everything is consumed.
size_t utf8_append_lossy(std::string_view bytes, bool final, std::string& out);

/// `bytes` with every ill-formed subsequence replaced by U+FFFD (EF BF BD).
std::string utf8_lossy(std::string_view bytes);

/// True when `bytes` is well-formed UTF-8 (no surrogates, no overlongs, at most U+10FFFF).
bool utf8_is_valid(std::string_view bytes);

/// Unicode NFC of valid UTF-8 `text` (utf8proc, canonical composition). Embedded NULs are kept.
/// Throws qs::Error if utf8proc rejects the input.
std::string nfc_normalize(std::string_view text);

}  // namespace qs::tokenizer_detail
