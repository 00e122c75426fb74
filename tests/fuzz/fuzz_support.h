// Helpers shared by the libFuzzer targets: scratch files for the file readers, the real Qwen3
// tokenizer and chat template, an independent UTF-8 validator (utf8proc) and a failing check that
// aborts with a message (libFuzzer saves the input as a crash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace qs::fuzz {

/// A fresh per-process scratch directory (under $TMPDIR, /dev/shm when available); created once.
const std::string& scratch_dir();

/// Writes `size` bytes to scratch_dir()/`name` (replacing it) and returns the path.
std::string write_scratch_file(const std::string& name, const uint8_t* data, size_t size);
std::string write_scratch_file(const std::string& name, std::string_view bytes);

/// The Qwen3 tokenizer (tokenizer.json + tokenizer_config.json from $QS_TOKENIZER_DIR, default
/// <source>/.cache/tokenizer-qwen3, see tools/fetch-tokenizer.sh), loaded once.
const Tokenizer& qwen3_tokenizer();
/// The Qwen3 chat template (tokenizer_config.json "chat_template"), parsed once.
const ChatTemplate& qwen3_chat_template();
/// Loads qwen3_tokenizer() and qwen3_chat_template() now. Call it from LLVMFuzzerInitialize:
/// under ASan on a busy machine the load takes tens of seconds, which would otherwise count
/// against the first input's -timeout.
void load_qwen3();
/// The text of a file under the source tree, e.g. "tests/fixtures/chat/templates/qwen3.jinja".
std::string read_source_file(const std::string& relative_path);

/// Well-formed UTF-8 per utf8proc (no surrogates, overlongs or code points above U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

/// Prints "fuzz check failed: <what>" and aborts.
[[noreturn]] void fail(const std::string& what);
inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

}  // namespace qs::fuzz
