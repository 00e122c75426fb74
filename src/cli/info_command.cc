// `qwenserve info`: what a model file holds: config, tensors by type, parameter count, file
// size, tokenizer and chat template presence. A tokenizer present but unusable is an error.
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "backend/factory/backend_factory.h"
#include "cli/commands.h"
#include "model/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace qs::cli {
namespace {

struct InfoOptions {
  std::string model_path;
  bool json = false;
};

nlohmann::json config_json(const ModelConfig& c) {
  return {{"architecture", architecture_name(c.arch)},
          {"hidden_size", c.hidden_size},
          {"intermediate_size", c.intermediate_size},
          {"num_hidden_layers", c.num_hidden_layers},
          {"num_attention_heads", c.num_attention_heads},
          {"num_key_value_heads", c.num_key_value_heads},
          {"head_dim", c.head_dim},
          {"vocab_size", c.vocab_size},
          {"max_position_embeddings", c.max_position_embeddings},
          {"rope_theta", c.rope_theta},
          {"rms_norm_eps", c.rms_norm_eps},
          {"tie_word_embeddings", c.tie_word_embeddings}};
}

int run_info(const InfoOptions& opt) {
  const auto model = load_model(opt.model_path);
  // The tokenizer is built as serve, generate and tokenize build it, so metadata they refuse
  // (a merge of tokens missing from the vocabulary, an unsupported tokenizer model, an invalid
  // tokenizer.json, ...) fails here too: qs::Error naming the file, exit code 1.
  if (model->has_tokenizer()) load_tokenizer(*model);
  std::map<std::string, int64_t> tensors_by_type;
  int64_t n_params = 0;
  auto count = [&](const TensorView& t) {
    ++tensors_by_type[std::string(dtype_name(t.dtype))];
    n_params += t.n_elements();
  };
  if (model->gguf) {
    for (const auto& t : model->gguf->tensors()) count(t);
  } else {
    for (const auto& [name, t] : model->safetensors->tensors()) count(t);
  }
  nlohmann::json out = {
      {"path", model->path},
      {"format", model->format == ModelFormat::kGguf ? "gguf" : "huggingface"},
      {"config", config_json(model->config)},
      {"tensors_by_type", tensors_by_type},
      {"parameters", n_params},
      {"file_bytes", model->file_bytes},
      {"tokenizer", model->has_tokenizer() ? nlohmann::json(model->tokenizer_source()) : nullptr},
      {"chat_template", !model->chat_template.empty()},
      {"backend", backend_kernel_paths("cpu")},
  };
  if (opt.json) {
    std::cout << out.dump(2) << std::endl;
    return 0;
  }
  std::printf("model:          %s (%s)\n", model->path.c_str(), out["format"].get<std::string>().c_str());
  for (const auto& [key, value] : out["config"].items()) {
    std::printf("  %-24s %s\n", key.c_str(), value.dump().c_str());
  }
  std::printf("tensors:       ");
  for (const auto& [type, n] : tensors_by_type) std::printf(" %s=%lld", type.c_str(), static_cast<long long>(n));
  std::printf("\nparameters:     %lld (%.3f B)\n", static_cast<long long>(n_params), n_params / 1e9);
  std::printf("file size:      %zu bytes (%.2f GiB)\n", model->file_bytes,
              static_cast<double>(model->file_bytes) / (1024.0 * 1024.0 * 1024.0));
  std::printf("backend:        %s\n", out["backend"].get<std::string>().c_str());
  std::printf("tokenizer:      %s\n", model->has_tokenizer() ? model->tokenizer_source().c_str() : "none");
  std::printf("chat template:  %s\n", model->chat_template.empty() ? "none" : "present");
  return 0;
}

}  // namespace

Command register_info(CLI::App& app) {
  auto opt = std::make_shared<InfoOptions>();
  app.add_option("-m,--model", opt->model_path, "GGUF file or Hugging Face model directory")
      ->required();
  app.add_flag("--json", opt->json, "Print JSON");
  return [opt] { return run_info(*opt); };
}

}  // namespace qs::cli
