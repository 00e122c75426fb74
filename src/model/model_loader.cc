#include "model/model_loader.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/binary_cursor.h"
#include "tokenizer/tokenizer.h"

namespace qs {
namespace fs = std::filesystem;

namespace {

// tokenizer_config.json's "chat_template": a string, or a list of {"name", "template"} where the
// one named "default" wins (transformers' convention).
std::string read_hf_chat_template(const fs::path& dir) {
  const fs::path path = dir / "tokenizer_config.json";
  if (!fs::exists(path)) return {};
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": malformed JSON: " + printable(e.what(), 400));
  }
  if (!j.is_object()) throw Error(path.string() + ": expected a JSON object");
  if (!j.contains("chat_template") || j["chat_template"].is_null()) return {};
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (!t.is_array()) {
    throw Error(path.string() + ": field 'chat_template' must be a string or a list of templates");
  }
  for (const auto& entry : t) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string()) {
      throw Error(path.string() +
                  ": field 'chat_template' list entries must be {\"name\": string, \"template\": string}");
    }
    if (entry["name"] == "default") return entry["template"].get<std::string>();
  }
  return {};  // named templates only, no default one
}

void load_gguf(LoadedModel& model) {
  model.gguf = std::make_unique<GgufFile>(GgufFile::open(model.path));
  const GgufFile& gguf = *model.gguf;
  model.config = model_config_from_gguf(gguf);
  model.file_bytes = gguf.file_size_bytes();
  model.chat_template = gguf.get_string_opt("tokenizer.chat_template").value_or("");
  model.weights = bind_model_weights(
      model.config, TensorNaming::kGguf,
      [&gguf](const std::string& name) { return gguf.find_tensor(name); }, model.path);
}

void load_hf_dir(LoadedModel& model) {
  const fs::path dir(model.path);
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) throw Error(model.path + ": no config.json in the directory");
  model.config = model_config_from_hf_json(config_path.string());
  model.safetensors = std::make_unique<SafetensorsModel>(SafetensorsModel::open_dir(model.path));
  model.file_bytes = model.safetensors->total_file_bytes();
  model.chat_template = read_hf_chat_template(dir);
  const SafetensorsModel& st = *model.safetensors;
  model.weights = bind_model_weights(
      model.config, TensorNaming::kHuggingFace,
      [&st](const std::string& name) { return st.find_tensor(name); }, model.path);
}

std::optional<int32_t> optional_id(const GgufFile& gguf, const std::string& key) {
  const std::optional<uint64_t> v = gguf.get_uint_opt(key);
  if (!v) return std::nullopt;
  if (*v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    throw Error(gguf.path() + ": metadata key '" + key + "' value " + std::to_string(*v) +
                " is not a valid token id");
  }
  return static_cast<int32_t>(*v);
}

/// Runs `build` and makes sure any qs::Error it throws names `source` (the tokenizer's file):
/// the tokenizer library reports some problems as "tokenizer: ..." without the file.
template <typename Build>
auto with_source(const std::string& source, Build build) -> decltype(build()) {
  try {
    return build();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (message.rfind(source, 0) == 0) throw;
    throw Error(source + ": " + message);
  }
}

}  // namespace

bool LoadedModel::has_tokenizer() const {
  if (format == ModelFormat::kGguf) return gguf->has("tokenizer.ggml.tokens");
  return fs::exists(fs::path(path) / "tokenizer.json");
}

std::string LoadedModel::tokenizer_source() const {
  if (format == ModelFormat::kGguf) return path + " (tokenizer.ggml.*)";
  return (fs::path(path) / "tokenizer.json").string();
}

std::unique_ptr<LoadedModel> load_model(const std::string& path) {
  auto model = std::make_unique<LoadedModel>();
  model->path = path;
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (ec) throw Error(path + ": cannot access: " + ec.message());
  if (!exists) throw Error(path + ": no such file or directory");
  if (fs::is_directory(path, ec)) {
    model->format = ModelFormat::kHuggingFace;
    load_hf_dir(*model);
  } else {
    model->format = ModelFormat::kGguf;
    load_gguf(*model);
  }
  return model;
}

std::unique_ptr<Tokenizer> load_tokenizer(const LoadedModel& model) {
  if (!model.has_tokenizer()) {
    throw Error(model.path + ": no tokenizer (expected " +
                (model.format == ModelFormat::kGguf ? std::string("tokenizer.ggml.* metadata")
                                                    : std::string("tokenizer.json in the directory")) +
                ")");
  }
  if (model.format == ModelFormat::kHuggingFace) {
    const std::string source = model.tokenizer_source();
    return with_source(source, [&] {
      return std::make_unique<Tokenizer>(load_tokenizer_json(source));
    });
  }
  const GgufFile& gguf = *model.gguf;
  const std::string kind = gguf.get_string_opt("tokenizer.ggml.model").value_or("gpt2");
  if (kind != "gpt2") {
    throw Error(model.path + ": tokenizer.ggml.model '" + printable(kind) +
                "' is not supported (expected gpt2 byte-level BPE)");
  }
  std::vector<int64_t> token_types;
  if (gguf.has("tokenizer.ggml.token_type")) token_types = gguf.get_int_array("tokenizer.ggml.token_type");
  std::vector<std::string> tokens = gguf.get_string_array("tokenizer.ggml.tokens");
  std::vector<std::string> merges = gguf.has("tokenizer.ggml.merges")
                                        ? gguf.get_string_array("tokenizer.ggml.merges")
                                        : std::vector<std::string>{};
  const std::optional<int32_t> bos = optional_id(gguf, "tokenizer.ggml.bos_token_id");
  const std::optional<int32_t> eos = optional_id(gguf, "tokenizer.ggml.eos_token_id");
  const std::optional<int32_t> pad = optional_id(gguf, "tokenizer.ggml.padding_token_id");
  return with_source(model.path, [&] {
    return std::make_unique<Tokenizer>(tokenizer_data_from_gguf(
        std::move(tokens), std::move(merges), std::move(token_types), bos, eos, pad));
  });
}

}  // namespace qs
