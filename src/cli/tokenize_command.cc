// `qwenserve tokenize`: text -> token ids (JSON array), or ids -> text with --decode.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "model/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace qs::cli {
namespace {

struct TokenizeOptions {
  std::string model_path;
  std::optional<std::string> text;
  std::optional<std::string> file;
  bool decode = false;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int run_tokenize(const TokenizeOptions& opt) {
  const auto model = load_model(opt.model_path);
  const auto tokenizer = load_tokenizer(*model);
  const std::string input = opt.text ? *opt.text : read_file(*opt.file);
  if (!opt.decode) {
    std::cout << nlohmann::json(tokenizer->encode(input)).dump() << std::endl;
    return 0;
  }
  nlohmann::json ids;
  try {
    ids = nlohmann::json::parse(input);
  } catch (const nlohmann::json::exception& e) {
    throw Error("--decode expects a JSON array of token ids: " + std::string(e.what()));
  }
  if (!ids.is_array()) throw Error("--decode expects a JSON array of token ids");
  std::vector<int32_t> tokens;
  for (const auto& id : ids) {
    if (!id.is_number_integer()) throw Error("--decode: every element must be an integer id");
    // Compare as int64 (uint64 above INT64_MAX reads negative): get<int32_t> would wrap silently.
    const int64_t value = id.is_number_unsigned() && id.get<uint64_t>() > uint64_t{INT64_MAX}
                              ? -1
                              : id.get<int64_t>();
    if (value < 0 || value > INT32_MAX) {
      throw Error("--decode: token id " + id.dump() + " is out of range");
    }
    tokens.push_back(static_cast<int32_t>(value));
  }
  std::cout << tokenizer->decode(tokens);
  std::cout.flush();
  return 0;
}

}  // namespace

Command register_tokenize(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  app.add_option("-m,--model", opt->model_path, "GGUF file or Hugging Face model directory")
      ->required();
  auto* text = app.add_option("--text", opt->text, "Text to tokenize (or JSON ids with --decode)");
  auto* file = app.add_option("--file", opt->file, "Read the input from a file");
  text->excludes(file);
  app.add_flag("--decode", opt->decode, "Input is a JSON array of ids; print their text");
  app.callback([text, file] {
    if (text->count() + file->count() == 0) throw CLI::RequiredError("--text or --file");
  });
  return [opt] { return run_tokenize(*opt); };
}

}  // namespace qs::cli
