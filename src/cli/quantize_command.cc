// `qwenserve quantize IN OUT --type TYPE`: writes a GGUF with the model's weights quantized to a
// mix of quant/quantize_policy.h (q8_0, q4_0, q4_k_m, q5_k_m, q6_k, bf16, f16, f32). IN is a GGUF
// file or a Hugging Face directory; progress (one line per tensor) and the size summary go to
// stderr.
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "cli/number_validators.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "quantize/model_quantizer.h"

namespace qs::cli {
namespace {

struct QuantizeCommandOptions {
  std::string in_path;
  std::string out_path;
  std::string type;
  int threads = 0;
  bool quiet = false;
};

int run_quantize(const QuantizeCommandOptions& opt) {
  const std::optional<QuantMix> mix = parse_quant_mix(opt.type);
  if (!mix) throw Error("--type: unknown type '" + opt.type + "'");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(opt.out_path, ec) && fs::equivalent(opt.in_path, opt.out_path, ec)) {
    throw Error(opt.out_path + ": output would overwrite the input");
  }
  // Checked before minutes of quantization, not when the writer opens the file.
  if (opt.out_path.empty()) throw Error("output path is empty; name a .gguf file");
  if (fs::is_directory(opt.out_path, ec)) throw Error(opt.out_path + ": output is a directory; name a .gguf file");
  // The writer renames OUT.tmp over OUT: never over a device, FIFO or socket (e.g. /dev/null).
  if (const fs::file_status st = fs::status(opt.out_path, ec); fs::exists(st) && !fs::is_regular_file(st)) {
    throw Error(opt.out_path + ": output exists and is not a regular file; name a .gguf file");
  }
  const fs::path parent = fs::path(opt.out_path).has_parent_path() ? fs::path(opt.out_path).parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) throw Error(opt.out_path + ": directory '" + parent.string() + "' does not exist");
  if (::access(parent.c_str(), W_OK) != 0) throw Error(opt.out_path + ": directory '" + parent.string() + "' is not writable");
  ThreadPool pool(opt.threads > 0 ? opt.threads : default_thread_count());
  QuantizeFileOptions options;
  options.mix = *mix;
  options.progress = opt.quiet ? nullptr : stderr;
  const QuantizeFileReport r = quantize_model_file(opt.in_path, opt.out_path, options, pool);
  for (const std::string& name : r.skipped) {
    std::fprintf(stderr, "warning: skipped tensor '%s' (not part of the model)\n", name.c_str());
  }
  std::string types;
  for (const auto& [name, count] : r.tensors_per_type) {
    types += (types.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  }
  const double in_mib = static_cast<double>(r.input_tensor_bytes) / (1024.0 * 1024.0);
  const double out_mib = static_cast<double>(r.output_tensor_bytes) / (1024.0 * 1024.0);
  std::fprintf(stderr,
               "wrote %s: %s, %lld tensors (%s); tensors %.2f MiB -> %.2f MiB (%.1f%%), file %zu "
               "bytes, %.1f s\n",
               opt.out_path.c_str(), std::string(quant_mix_name(*mix)).c_str(),
               static_cast<long long>(r.n_tensors), types.c_str(), in_mib, out_mib,
               in_mib > 0 ? 100.0 * out_mib / in_mib : 0.0, r.output_file_bytes, r.seconds);
  return 0;
}

}  // namespace

Command register_quantize(CLI::App& app) {
  auto opt = std::make_shared<QuantizeCommandOptions>();
  app.add_option("input", opt->in_path, "GGUF file or Hugging Face model directory")->required();
  app.add_option("output", opt->out_path, "Output GGUF file")->required();
  app.add_option("--type", opt->type, "Weight type: q8_0, q4_0, q4_k_m, q5_k_m, q6_k, bf16, f16, f32")
      ->required()
      ->check(CLI::IsMember(quant_mix_names()));
  app.add_option("-t,--threads", opt->threads, "Worker threads (default: all CPUs)")
      ->check(kNonNegative);
  app.add_flag("-q,--quiet", opt->quiet, "No per-tensor progress lines");
  return [opt] { return run_quantize(*opt); };
}

}  // namespace qs::cli
