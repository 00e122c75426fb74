// `qwenserve logits`: runs one sequence of token ids through the model and writes the logits of
// every position as raw little-endian f32 [n_tokens, vocab_size], for comparison with a reference.
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "cli/runtime.h"
#include "core/error.h"
#include "engine/sequence_runner.h"

namespace qs::cli {
namespace {

struct LogitsOptions {
  RuntimeOptions runtime;
  std::string tokens;
  std::string out_path;
};

std::vector<int32_t> parse_ids(const std::string& csv) {
  std::vector<int32_t> ids;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(static_cast<int32_t>(std::stol(item, &used)));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error("--tokens: '" + item + "' is not an integer token id");
    }
  }
  if (ids.empty()) throw Error("--tokens: no token ids given");
  return ids;
}

int run_logits(const LogitsOptions& opt) {
  const std::vector<int32_t> ids = parse_ids(opt.tokens);
  Runtime rt = make_runtime(opt.runtime);
  const int64_t vocab = rt.model->config.vocab_size;
  SequenceRunner sequence(*rt.backend);
  std::vector<float> logits;
  sequence.append(ids, nullptr, /*all_logits=*/true, &logits);
  std::FILE* f = std::fopen(opt.out_path.c_str(), "wb");
  if (f == nullptr) throw Error(opt.out_path + ": cannot open for writing");
  const size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  const bool ok = std::fclose(f) == 0 && written == logits.size();
  if (!ok) throw Error(opt.out_path + ": write failed");
  std::fprintf(stderr, "wrote logits [%zu, %lld] to %s\n", ids.size(),
               static_cast<long long>(vocab), opt.out_path.c_str());
  return 0;
}

}  // namespace

Command register_logits(CLI::App& app) {
  auto opt = std::make_shared<LogitsOptions>();
  opt->runtime.add_to(app);
  app.add_option("--tokens", opt->tokens, "Comma-separated token ids")->required();
  app.add_option("-o,--out", opt->out_path, "Output file (raw f32)")->required();
  return [opt] { return run_logits(*opt); };
}

}  // namespace qs::cli
