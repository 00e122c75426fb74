#include "fuzz_support.h"

#include <unistd.h>
#include <utf8proc.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace qs::fuzz {

const std::string& scratch_dir() {
  // Never destroyed: the atexit handler that removes the directory runs after static destructors.
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = tmp != nullptr && *tmp != '\0' ? tmp : (std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp");
    auto* path = new std::string(base + "/qs-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(*path);
    std::atexit([] { std::error_code ec; std::filesystem::remove_all(scratch_dir(), ec); });
    return path;
  }();
  return *dir;
}

std::string write_scratch_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) fail("cannot write " + path);
  return path;
}

std::string write_scratch_file(const std::string& name, std::string_view bytes) {
  return write_scratch_file(name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

namespace {
std::string tokenizer_dir() {
  const char* env = std::getenv("QS_TOKENIZER_DIR");
  return env != nullptr && *env != '\0' ? env : std::string(QS_SOURCE_DIR) + "/.cache/tokenizer-qwen3";
}
}  // namespace

const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tokenizer(load_tokenizer_json(tokenizer_dir() + "/tokenizer.json"));
  return tokenizer;
}

const ChatTemplate& qwen3_chat_template() {
  static const ChatTemplate chat_template = [] {
    std::ifstream in(tokenizer_dir() + "/tokenizer_config.json");
    if (!in) fail("no tokenizer_config.json in " + tokenizer_dir() + " (run tools/fetch-tokenizer.sh)");
    const nlohmann::json config = nlohmann::json::parse(in);
    return ChatTemplate(config.at("chat_template").get<std::string>());
  }();
  return chat_template;
}

void load_qwen3() {
  (void)qwen3_tokenizer();
  (void)qwen3_chat_template();
}

std::string read_source_file(const std::string& relative_path) {
  std::ifstream in(std::string(QS_SOURCE_DIR) + "/" + relative_path, std::ios::binary);
  if (!in) fail("cannot read " + relative_path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_valid_utf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(bytes.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0 || cp < 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace qs::fuzz

