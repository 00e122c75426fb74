#include "model/model_loader.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
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
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": malformed JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("chat_template")) return {};
  const auto& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& entry : t) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template")) {
        return entry["template"].get<std::string>();
      }
    }
  }
  throw Error(path.string() + ": field 'chat_template' must be a string or a list of templates");
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
  if (auto v = gguf.get_uint_opt(key)) return static_cast<int32_t>(*v);
  return std::nullopt;
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
  if (!fs::exists(path, ec)) throw Error(path + ": no such file or directory");
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
    return std::make_unique<Tokenizer>(load_tokenizer_json(model.tokenizer_source()));
  }
  const GgufFile& gguf = *model.gguf;
  const std::string kind = gguf.get_string_opt("tokenizer.ggml.model").value_or("gpt2");
  if (kind != "gpt2") {
    throw Error(model.path + ": tokenizer.ggml.model '" + kind +
                "' is not supported (expected gpt2 byte-level BPE)");
  }
  std::vector<int64_t> token_types;
  if (gguf.has("tokenizer.ggml.token_type")) token_types = gguf.get_int_array("tokenizer.ggml.token_type");
  return std::make_unique<Tokenizer>(tokenizer_data_from_gguf(
      gguf.get_string_array("tokenizer.ggml.tokens"),
      gguf.has("tokenizer.ggml.merges") ? gguf.get_string_array("tokenizer.ggml.merges")
                                        : std::vector<std::string>{},
      std::move(token_types), optional_id(gguf, "tokenizer.ggml.bos_token_id"),
      optional_id(gguf, "tokenizer.ggml.eos_token_id"),
      optional_id(gguf, "tokenizer.ggml.padding_token_id")));
}

}  // namespace qs
