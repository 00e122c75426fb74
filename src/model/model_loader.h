// Opens a model in either format users download: a GGUF file, or a Hugging Face directory
// (config.json, model.safetensors or a sharded index, tokenizer.json, tokenizer_config.json).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "io/gguf_reader.h"
#include "io/safetensors_reader.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace qs {

class Tokenizer;

enum class ModelFormat { kGguf, kHuggingFace };

/// A loaded model: config, weight views into the memory-mapped files, and where its tokenizer and
/// chat template are. Not movable: `weights` points into `gguf` / `safetensors`.
struct LoadedModel {
  std::string path;
  ModelFormat format = ModelFormat::kGguf;
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<GgufFile> gguf;                // set for GGUF
  std::unique_ptr<SafetensorsModel> safetensors;  // set for Hugging Face directories
  std::string chat_template;                     // empty when the model ships none
  size_t file_bytes = 0;                         // total size of the weight files

  /// True when a tokenizer is available (GGUF tokenizer.ggml.tokens, or <dir>/tokenizer.json).
  bool has_tokenizer() const;
  /// Where the tokenizer comes from: "<file>.gguf (tokenizer.ggml.*)" or "<dir>/tokenizer.json".
  std::string tokenizer_source() const;

  LoadedModel() = default;
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;
};

/// Detects the format from `path` (a directory => Hugging Face, otherwise GGUF), opens the files,
/// reads the config and binds every weight. Throws qs::Error naming the file and the problem.
std::unique_ptr<LoadedModel> load_model(const std::string& path);

/// Builds the model's tokenizer. Throws qs::Error "<path>: no tokenizer ..." when it has none.
std::unique_ptr<Tokenizer> load_tokenizer(const LoadedModel& model);

}  // namespace qs
