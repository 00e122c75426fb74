// GPT-2 byte-level alphabet ("bytes_to_unicode"), used by Qwen2/Qwen3 and other byte-level BPEs.
//
// Every byte value gets one visible code point: the printable bytes '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF stand for themselves (as Latin-1 code points); the remaining 68 bytes (controls,
// space, 0x7F..0xA0, 0xAD) get U+0100, U+0101, ... in increasing byte order. So ' ' is 'Ġ'
// (U+0120) and '\n' is 'Ċ' (U+010A). Vocabulary entries are spelled in this alphabet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace qs::tokenizer_detail {

/// Code point that spells byte `b` in the byte-level alphabet.
uint32_t byte_to_codepoint(uint8_t b);

/// Byte spelled by code point `cp`, or -1 when `cp` is not in the byte-level alphabet.
int codepoint_to_byte(uint32_t cp);

/// UTF-8 byte-level spelling of raw `bytes` (each byte becomes one code point).
std::string bytes_to_byte_level(std::string_view bytes);

/// Raw bytes of a token spelled in the byte-level alphabet. Returns false (and leaves `out` in an
/// unspecified state) when `token` is not valid UTF-8 or uses a code point outside the alphabet.
bool byte_level_to_bytes(std::string_view token, std::string& out);

}  // namespace qs::tokenizer_detail
