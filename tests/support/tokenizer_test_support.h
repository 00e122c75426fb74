// Shared helpers for tests/tokenizer/*_test.cc: locating the real Qwen3 tokenizer and loading
// the corpus with its reference ids (corpus.json + expected_ids.json from generate.mjs).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace qs::test {

/// Directory with the Qwen3 tokenizer.json: $QS_TOKENIZER_DIR, else
/// $QS_SOURCE_DIR/.cache/tokenizer-qwen3 (env, then the build's source dir). Throws (failing
/// the test, never skipping it) when tokenizer.json is not there.
inline std::string qwen_tokenizer_dir() {
  std::string dir;
  if (const char* env = std::getenv("QS_TOKENIZER_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else {
    const char* src = std::getenv("QS_SOURCE_DIR");
    dir = std::string(src != nullptr && *src != '\0' ? src : QS_SOURCE_DIR) +
          "/.cache/tokenizer-qwen3";
  }
  if (!std::filesystem::exists(dir + "/tokenizer.json")) {
    throw std::runtime_error("Qwen3 tokenizer not found in " + dir +
                             " (set QS_TOKENIZER_DIR or run tools/fetch-tokenizer.sh)");
  }
  return dir;
}

inline const TokenizerData& qwen_tokenizer_data() {
  static const TokenizerData data = load_tokenizer_json(qwen_tokenizer_dir() + "/tokenizer.json");
  return data;
}

/// The real Qwen3 tokenizer, loaded once per test binary.
inline const Tokenizer& qwen_tokenizer() {
  static const Tokenizer tokenizer(qwen_tokenizer_data());
  return tokenizer;
}

struct CorpusCase {
  std::string tag;
  std::string text;
  std::vector<int32_t> ids;  // reference ids (@huggingface/tokenizers)
  std::string decoded;       // reference decode(ids)
  std::string decoded_skip_special;
};

inline nlohmann::json read_fixture_json(const std::string& name) {
  const std::string path = std::string(QS_FIXTURES_DIR) + "/tokenizer/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return nlohmann::json::parse(buffer.str());
}

/// Corpus cases joined with their reference results. Throws when the two files disagree
/// (regenerate with `node tests/fixtures/tokenizer/generate.mjs`).
inline const std::vector<CorpusCase>& corpus_cases() {
  static const std::vector<CorpusCase> cases = [] {
    const nlohmann::json corpus = read_fixture_json("corpus.json");
    const nlohmann::json expected = read_fixture_json("expected_ids.json");
    const auto& in = corpus.at("cases");
    const auto& ref = expected.at("cases");
    if (in.size() != ref.size()) {
      throw std::runtime_error(
          "expected_ids.json is stale: run node tests/fixtures/tokenizer/generate.mjs");
    }
    std::vector<CorpusCase> out;
    for (size_t i = 0; i < in.size(); ++i) {
      CorpusCase c{in[i].at("tag"), in[i].at("text"), ref[i].at("ids"), ref[i].at("decoded"),
                   ref[i].at("decoded_skip_special")};
      if (ref[i].at("text") != c.text) {
        throw std::runtime_error("expected_ids.json case " + std::to_string(i) +
                                 " is stale: run node tests/fixtures/tokenizer/generate.mjs");
      }
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

/// Printable form of a byte string for failure messages: printable ASCII as is, others \xNN.
inline std::string escaped(const std::string& s, size_t max_bytes = 300) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  if (s.size() > max_bytes) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

inline std::string ids_to_string(const std::vector<int32_t>& ids, size_t max_ids = 200) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < max_ids; ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  if (ids.size() > max_ids) out += ",...(" + std::to_string(ids.size()) + " ids)";
  return out + "]";
}

}  // namespace qs::test
