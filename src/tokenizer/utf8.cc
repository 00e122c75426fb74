#include "tokenizer/utf8.h"

#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>

#include "core/error.h"

namespace qs::tokenizer_detail {
namespace {

enum class SeqStatus { kValid, kInvalid, kTruncated };

struct SeqInfo {
  SeqStatus status;
  size_t length;  // bytes of the valid char, or of the maximal subpart to replace
};

// Classifies the sequence starting at s[0] (n >= 1 bytes available) per Table 3-7.
SeqInfo classify(const uint8_t* s, size_t n) {
  const uint8_t b0 = s[0];
  if (b0 < 0x80) return {SeqStatus::kValid, 1};
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {SeqStatus::kInvalid, 1};
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= n) return {SeqStatus::kTruncated, i};
    const uint8_t b = s[i];
    const bool ok = (i == 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {SeqStatus::kInvalid, i};
  }
  return {SeqStatus::kValid, need};
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

size_t utf8_append_lossy(std::string_view bytes, bool final, std::string& out) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  size_t run_start = 0;  // start of the pending run of valid bytes, copied in one append
  while (i < n) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const SeqInfo info = classify(s + i, n - i);
    if (info.status == SeqStatus::kValid) {
      i += info.length;
      continue;
    }
    out.append(bytes.substr(run_start, i - run_start));
    if (info.status == SeqStatus::kTruncated && !final) return i;
    out.append(kReplacement);
    i += info.length;
    run_start = i;
  }
  out.append(bytes.substr(run_start, n - run_start));
  return n;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  utf8_append_lossy(bytes, /*final=*/true, out);
  return out;
}

bool utf8_is_valid(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  for (size_t i = 0; i < n;) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const SeqInfo info = classify(s + i, n - i);
    if (info.status != SeqStatus::kValid) return false;
    i += info.length;
  }
  return true;
}

std::string nfc_normalize(std::string_view text) {
  bool ascii = true;
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);  // ASCII is always in NFC
  utf8proc_uint8_t* dst = nullptr;
  const utf8proc_ssize_t len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &dst,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (len < 0) {
    throw Error(std::string("tokenizer: NFC normalization failed: ") + utf8proc_errmsg(len));
  }
  std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(len));
  std::free(dst);
  return out;
}

}  // namespace qs::tokenizer_detail
