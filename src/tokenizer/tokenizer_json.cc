// load_tokenizer_json: Hugging Face tokenizer.json (+ optional tokenizer_config.json) reader.
//
// Format: https://huggingface.co/docs/tokenizers (serialization of tokenizers::Tokenizer):
// {"added_tokens": [{"id", "content", "special", ...}], "normalizer": {...}|null,
//  "pre_tokenizer": {...}, "decoder": {...}, "model": {"type": "BPE", "vocab": {token: id},
//  "merges": [["a", "b"], ...] or ["a b", ...], ...}}.
#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace qs {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return json::parse(buffer.str());
  } catch (const json::exception& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
}

std::string type_of(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
  return j["type"].get<std::string>();
}

// True when a JSON field is absent, null or equal to `expected`.
template <typename T>
bool is_default(const json& obj, const char* key, const T& expected) {
  return !obj.contains(key) || obj[key].is_null() || obj[key] == expected;
}

void check_model_settings(const json& model, const std::string& path) {
  const std::string type = type_of(model);
  if (type != "BPE" && !(type.empty() && model.contains("merges"))) {
    throw Error(path + ": model.type is '" + type + "', only BPE is supported");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    throw Error(path + ": model.vocab missing or not an object");
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    throw Error(path + ": model.merges missing or not an array");
  }
  if (!is_default(model, "dropout", 0.0) || !is_default(model, "byte_fallback", false) ||
      !is_default(model, "ignore_merges", false) ||
      !is_default(model, "continuing_subword_prefix", "") ||
      !is_default(model, "end_of_word_suffix", "")) {
    throw Error(path + ": model uses unsupported BPE options (dropout, byte_fallback, "
                       "ignore_merges, continuing_subword_prefix or end_of_word_suffix)");
  }
}

void read_vocab(const json& vocab, const std::string& path, TokenizerData& data) {
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() > kMaxTokenId) {
      throw Error(path + ": model.vocab['" + token + "'] is not a valid token id");
    }
    const auto id = static_cast<size_t>(id_json.get<int64_t>());
    if (id >= data.vocab.size()) data.vocab.resize(id + 1);
    data.vocab[id] = token;
  }
}

void read_merges(const json& merges, const std::string& path, TokenizerData& data) {
  data.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      data.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    const size_t space = m.is_string() ? m.get_ref<const std::string&>().find(' ') : 0;
    if (!m.is_string() || space == std::string::npos) {
      throw Error(path + ": model.merges[" + std::to_string(i) +
                  "] is neither [\"a\", \"b\"] nor \"a b\"");
    }
    const std::string& s = m.get_ref<const std::string&>();
    data.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
  }
}

void read_added_tokens(const json& root, const std::string& path, TokenizerData& data) {
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return;
  const json& list = root["added_tokens"];
  if (!list.is_array()) throw Error(path + ": added_tokens is not an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string() || t["id"].get<int64_t>() < 0 ||
        t["id"].get<int64_t>() > kMaxTokenId) {
      throw Error(path + ": added_tokens[" + std::to_string(i) + "] needs an id and a content");
    }
    const bool special = t.contains("special") && t["special"] == true;
    data.added_tokens.push_back(AddedToken{static_cast<int32_t>(t["id"].get<int64_t>()),
                                           t["content"].get<std::string>(), special});
  }
}

bool read_normalizer(const json& root, const std::string& path) {
  if (!root.contains("normalizer") || root["normalizer"].is_null()) return false;
  const json& n = root["normalizer"];
  if (type_of(n) == "NFC") return true;
  if (type_of(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array() &&
      n["normalizers"].size() == 1 && type_of(n["normalizers"][0]) == "NFC") {
    return true;
  }
  throw Error(path + ": normalizer '" + type_of(n) + "' is not supported (only NFC or none)");
}

// Escapes a literal Split pattern ({"String": "..."}) for use as a regex.
std::string escape_literal(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

std::string read_split(const json& split, const std::string& path) {
  if (!is_default(split, "behavior", "Isolated") || !is_default(split, "invert", false)) {
    throw Error(path + ": pre_tokenizer Split must have behavior Isolated and invert false");
  }
  const json& pattern = split.contains("pattern") ? split["pattern"] : json();
  if (pattern.contains("Regex") && pattern["Regex"].is_string()) return pattern["Regex"];
  if (pattern.contains("String") && pattern["String"].is_string()) {
    return escape_literal(pattern["String"].get<std::string>());
  }
  throw Error(path + ": pre_tokenizer Split has no Regex or String pattern");
}

// Returns the split regex; requires a ByteLevel step (without prefix space).
std::string read_pre_tokenizer(const json& root, const std::string& path) {
  const json pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  const json steps = type_of(pre) == "Sequence" && pre.contains("pretokenizers")
                         ? pre["pretokenizers"]
                         : json::array({pre});
  std::string regex;
  bool byte_level = false;
  for (const json& step : steps) {
    const std::string type = type_of(step);
    if (type == "Split" && regex.empty()) {
      regex = read_split(step, path);
    } else if (type == "ByteLevel" && !byte_level) {
      if (!is_default(step, "add_prefix_space", false)) {
        throw Error(path + ": ByteLevel add_prefix_space is not supported");
      }
      byte_level = true;
      if (step.contains("use_regex") && step["use_regex"] == true) {
        if (!regex.empty()) throw Error(path + ": Split followed by a regex ByteLevel step");
        regex = std::string(tokenizer_detail::kGpt2SplitRegex);
      }
    } else {
      throw Error(path + ": pre_tokenizer step '" + type + "' is not supported");
    }
  }
  if (!byte_level) throw Error(path + ": pre_tokenizer has no ByteLevel step (not byte-level)");
  if (regex.empty()) throw Error(path + ": pre_tokenizer has no Split regex");
  return regex;
}

// Id of a special token named in tokenizer_config.json ("<|im_end|>" or {"content": ...}).
std::optional<int32_t> config_token_id(const json& config, const char* key,
                                       const TokenizerData& data, const std::string& path) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& v = config[key];
  const json& content = v.is_object() && v.contains("content") ? v["content"] : v;
  if (!content.is_string()) throw Error(path + ": " + key + " is not a string");
  const std::string text = content.get<std::string>();
  for (const AddedToken& t : data.added_tokens) {
    if (t.content == text) return t.id;
  }
  const std::string spelled = tokenizer_detail::bytes_to_byte_level(text);
  for (size_t id = 0; id < data.vocab.size(); ++id) {
    if (data.vocab[id] == spelled) return static_cast<int32_t>(id);
  }
  throw Error(path + ": " + key + " '" + text + "' is not a token of the vocabulary");
}

void read_config(const std::string& tokenizer_path, TokenizerData& data) {
  const auto config_path =
      (std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json").string();
  if (!std::filesystem::exists(config_path)) return;
  const json config = read_json_file(config_path);
  if (!config.is_object()) throw Error(config_path + ": not a JSON object");
  data.bos_id = config_token_id(config, "bos_token", data, config_path);
  data.eos_id = config_token_id(config, "eos_token", data, config_path);
  data.pad_id = config_token_id(config, "pad_token", data, config_path);
}

}  // namespace

TokenizerData load_tokenizer_json(const std::string& path) {
  const json root = read_json_file(path);
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    throw Error(path + ": not a tokenizer.json (no \"model\" object)");
  }
  TokenizerData data;
  try {
    const json& model = root["model"];
    check_model_settings(model, path);
    if (type_of(root.value("decoder", json())) != "ByteLevel") {
      throw Error(path + ": decoder is not ByteLevel (not a byte-level BPE tokenizer)");
    }
    data.split_regex = read_pre_tokenizer(root, path);
    data.normalize_nfc = read_normalizer(root, path);
    read_vocab(model["vocab"], path, data);
    read_merges(model["merges"], path, data);
    read_added_tokens(root, path, data);
  } catch (const json::exception& e) {  // a field of an unexpected JSON type
    throw Error(path + ": unexpected structure: " + e.what());
  }
  read_config(path, data);
  return data;
}

}  // namespace qs
