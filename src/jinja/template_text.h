// Text helpers for the chat-template interpreter that reproduce JavaScript string and number
// semantics on UTF-8 data.
//
// The reference implementation of chat templates is @huggingface/jinja, which runs on JavaScript
// strings (UTF-16) and numbers (IEEE doubles). To render byte-identical output, string lengths
// count UTF-16 code units, whitespace means the ECMAScript WhiteSpace + LineTerminator set, and
// numbers print the way Number.prototype.toString prints them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qs::chat::text {

/// Decodes the UTF-8 sequence at `pos` and advances `pos` past it. Malformed or truncated bytes
/// decode one byte at a time as U+FFFD.
char32_t decode_utf8(std::string_view s, size_t& pos);

/// Appends the UTF-8 encoding of `cp` to `out` (surrogates and values past U+10FFFF as U+FFFD).
void append_utf8(std::string& out, char32_t cp);

/// ECMAScript whitespace (WhiteSpace and LineTerminator, as matched by the regex class \s).
bool is_js_space(char32_t cp);

/// The ASCII word characters of the regex class \w: [A-Za-z0-9_].
bool is_word_byte(char c);

/// Length of the run of is_js_space characters that starts at `pos`, in bytes.
size_t space_run(std::string_view s, size_t pos);

/// String.prototype.trimStart / trimEnd / trim.
std::string_view trim_start(std::string_view s);
std::string_view trim_end(std::string_view s);
std::string_view trim(std::string_view s);

/// The string's length in UTF-16 code units (what JavaScript's .length reports).
size_t utf16_length(std::string_view s);

/// Splits `s` into its code points (each a view of its UTF-8 bytes), like Array.from(string).
std::vector<std::string_view> code_points(std::string_view s);

/// Full-string case mapping like toUpperCase / toLowerCase: ASCII exactly, other code points via
/// utf8proc's simple case mapping (plus U+00DF to "SS" when upper-casing).
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);

/// The reference's title(): upper-cases every ASCII word character that follows a non-word
/// character (regex /\b\w/g); the rest of the string is left as is.
std::string title_case(std::string_view s);

/// The reference's capitalize(): upper-cases the first character, leaves the rest as is.
std::string capitalize(std::string_view s);

/// Number.prototype.toString for a double: shortest round-trip digits, exponent form outside
/// [1e-6, 1e21), "NaN", "Infinity", and "0" for both zeros.
std::string format_js_number(double value);

/// How the reference prints a float value: integral values with one decimal ("2.0"), -0 as
/// "-0.0", everything else like format_js_number.
std::string format_float(double value);

/// parseInt(s, 10): optional leading whitespace and sign, then the longest run of digits.
/// Returns nullopt where JavaScript returns NaN.
std::optional<double> parse_js_int(std::string_view s);

/// parseFloat(s): the longest prefix that is a decimal literal (or Infinity). nullopt for NaN.
std::optional<double> parse_js_float(std::string_view s);

/// ToNumber(string) as used by JavaScript's loose equality: the whole trimmed string must be a
/// number literal (decimal, 0x/0o/0b, Infinity); "" is 0; anything else is NaN.
double js_string_to_number(std::string_view s);

/// JSON.stringify of a string: escapes '"', '\\' and control characters (\b \f \n \r \t or
/// \u00xx). With `ensure_ascii`, every code unit from U+007F up is written as \uXXXX as well.
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace qs::chat::text
