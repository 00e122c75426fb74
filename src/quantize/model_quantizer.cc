#include "quantize/model_quantizer.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "io/gguf_writer.h"
#include "model/model_loader.h"
#include "quantize/hf_gguf_metadata.h"
#include "formats/quantize.h"

namespace qs {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

struct NamedTensor {
  std::string gguf_name;
  const TensorView* view;
};

// The model's tensors under GGUF names: file order for GGUF, converter order for HF directories.
std::vector<NamedTensor> model_tensors(const LoadedModel& model, std::vector<std::string>* skipped) {
  std::vector<NamedTensor> out;
  if (model.format == ModelFormat::kGguf) {
    for (const TensorView& t : model.gguf->tensors()) out.push_back({t.name, &t});
    return out;
  }
  for (const auto& [name, view] : model.safetensors->tensors()) {
    std::optional<std::string> gguf = gguf_tensor_name(name);
    if (!gguf) {
      if (skipped != nullptr) skipped->push_back(name);
      continue;
    }
    out.push_back({*gguf, &view});
  }
  std::stable_sort(out.begin(), out.end(), [](const NamedTensor& a, const NamedTensor& b) {
    return gguf_tensor_order(a.gguf_name) < gguf_tensor_order(b.gguf_name);
  });
  return out;
}

bool has_output_matrix(const std::vector<NamedTensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const NamedTensor& t) { return t.gguf_name == "output.weight"; });
}

void copy_gguf_metadata(GgufWriter& w, const GgufFile& in) {
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.alignment" || key == "general.file_type" ||
        key == "general.quantization_version") {
      continue;
    }
    w.add_value(key, value);
  }
}

}  // namespace

void convert_tensor(const TensorView& src, DType dst_type, uint8_t* dst, ThreadPool& pool) {
  const int64_t rows = src.rows();
  const int64_t cols = src.cols();
  const size_t out_row = row_bytes(dst_type, cols);
  if (src.dtype == dst_type) {
    std::copy(src.data, src.data + out_row * static_cast<size_t>(rows), dst);
    return;
  }
  const size_t in_row = row_bytes(src.dtype, cols);
  pool.parallel_for(rows, [&](int64_t begin, int64_t end, int) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      dequantize_row(src.dtype, src.data + static_cast<size_t>(r) * in_row, row.data(), cols);
      quantize_row(dst_type, row.data(), dst + static_cast<size_t>(r) * out_row, cols);
    }
  });
}

QuantizeFileReport quantize_model_file(const std::string& in_path, const std::string& out_path,
                                       const QuantizeFileOptions& options, ThreadPool& pool) {
  const auto start = Clock::now();
  std::unique_ptr<LoadedModel> model = load_model(in_path);  // validates config and every tensor
  QuantizeFileReport report;
  const std::vector<NamedTensor> tensors = model_tensors(*model, &report.skipped);
  const bool tied = !has_output_matrix(tensors);
  const int64_t n_layers = model->config.num_hidden_layers;

  GgufWriter writer;
  if (model->format == ModelFormat::kGguf) {
    copy_gguf_metadata(writer, *model->gguf);
  } else {
    add_hf_gguf_metadata(writer, *model);
  }
  writer.add_uint32("general.file_type", quant_mix_file_type(options.mix));
  writer.add_uint32("general.quantization_version", 2);

  const size_t n = tensors.size();
  for (size_t i = 0; i < n; ++i) {
    const NamedTensor& t = tensors[i];
    const DType type = tensor_type_for(options.mix, t.gguf_name, t.view->shape, n_layers, tied);
    const size_t out_bytes = GgufWriter::tensor_bytes(t.gguf_name, type, t.view->shape);
    report.input_tensor_bytes += t.view->size_bytes;
    report.output_tensor_bytes += out_bytes;
    ++report.tensors_per_type[std::string(dtype_name(type))];
    writer.add_tensor_lazy(
        t.gguf_name, type, t.view->shape,
        [&, i, type, view = t.view, name = t.gguf_name](uint8_t* dst, size_t size_bytes) {
          const auto t0 = Clock::now();
          convert_tensor(*view, type, dst, pool);
          if (options.progress != nullptr) {
            std::fprintf(options.progress, "[%zu/%zu] %-28s %-16s %5s -> %-5s %9.2f -> %9.2f MiB %6.2f s\n",
                         i + 1, n, name.c_str(), shape_to_string(view->shape).c_str(),
                         std::string(dtype_name(view->dtype)).c_str(),
                         std::string(dtype_name(type)).c_str(), mib(view->size_bytes),
                         mib(size_bytes), seconds_since(t0));
            std::fflush(options.progress);
          }
        });
  }
  report.n_tensors = static_cast<int64_t>(n);
  writer.write(out_path);
  report.output_file_bytes = static_cast<size_t>(std::filesystem::file_size(out_path));
  report.seconds = seconds_since(start);
  return report;
}

std::unique_ptr<QuantizedWeights> quantize_weights(const LoadedModel& model, QuantMix mix,
                                                   ThreadPool& pool, std::FILE* progress) {
  auto out = std::make_unique<QuantizedWeights>();
  out->mix = mix;
  out->weights = model.weights;
  const ModelWeights& src = model.weights;
  const bool tied = src.lm_head == src.embed_tokens;
  const int64_t n_layers = model.config.num_hidden_layers;
  size_t total = model_weight_bytes(src);  // minus the 1-D tensors, which are not converted
  for (const LayerWeights& l : src.layers) {
    for (const TensorView* t : {l.attn_norm, l.q_bias, l.k_bias, l.v_bias, l.q_norm, l.k_norm, l.ffn_norm}) {
      total -= t != nullptr ? t->size_bytes : 0;
    }
  }
  total -= src.final_norm != nullptr ? src.final_norm->size_bytes : 0;
  size_t done = 0;
  int reported_decile = 0;
  std::unordered_map<const TensorView*, const TensorView*> remapped;

  auto convert = [&](const TensorView*& slot) {
    if (slot == nullptr || slot->shape.size() < 2) return;
    if (auto it = remapped.find(slot); it != remapped.end()) {
      slot = it->second;
      return;
    }
    const TensorView& in = *slot;
    std::string gguf_name = in.name;
    if (model.format == ModelFormat::kHuggingFace) gguf_name = gguf_tensor_name(in.name).value_or(in.name);
    const DType type = tensor_type_for(mix, gguf_name, in.shape, n_layers, tied);
    std::vector<uint8_t>& bytes = out->data.emplace_back(in.rows() * row_bytes(type, in.cols()));
    convert_tensor(in, type, bytes.data(), pool);
    TensorView& view = out->views.emplace_back();
    view = TensorView{in.name, type, in.shape, bytes.data(), bytes.size()};
    remapped[slot] = &view;
    slot = &view;
    done += in.size_bytes;
    const int decile = total > 0 ? static_cast<int>(done * 10 / total) : 10;
    if (progress != nullptr && decile > reported_decile) {
      reported_decile = decile;
      const std::string line = "quantizing weights to " + std::string(quant_mix_name(mix)) + ": " + std::to_string(decile * 10) + "%";
      if (progress == stderr && process_log::uses_json()) {
        process_log::info(line);  // serve --log-format json: one JSON object per stderr line
      } else {
        std::fprintf(progress, "%s\n", line.c_str());
      }
    }
  };
  ModelWeights& w = out->weights;
  convert(w.embed_tokens);
  for (LayerWeights& l : w.layers) {
    for (const TensorView** slot : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj,
                                    &l.up_proj, &l.down_proj}) {
      convert(*slot);
    }
  }
  convert(w.lm_head);
  return out;
}

size_t model_weight_bytes(const ModelWeights& w) {
  std::vector<const TensorView*> all = {w.embed_tokens, w.final_norm, w.lm_head};
  for (const LayerWeights& l : w.layers) {
    all.insert(all.end(), {l.attn_norm, l.q_proj, l.k_proj, l.v_proj, l.o_proj, l.q_bias, l.k_bias,
                           l.v_bias, l.q_norm, l.k_norm, l.ffn_norm, l.gate_proj, l.up_proj,
                           l.down_proj});
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  size_t bytes = 0;
  for (const TensorView* t : all) bytes += t != nullptr ? t->size_bytes : 0;
  return bytes;
}

std::string describe_weight_type(const LoadedModel& model, const QuantizedWeights* quantized) {
  if (quantized != nullptr) {
    std::string name(quant_mix_name(quantized->mix));
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return name;
  }
  if (model.format == ModelFormat::kGguf) {
    if (auto ft = model.gguf->get_uint_opt("general.file_type")) {
      if (auto name = file_type_name(static_cast<uint32_t>(*ft))) return *name;
    }
  }
  std::map<std::string, size_t> bytes_per_type;
  for (const LayerWeights& l : model.weights.layers) {
    for (const TensorView* t : {l.q_proj, l.k_proj, l.v_proj, l.o_proj, l.gate_proj, l.up_proj,
                                l.down_proj}) {
      bytes_per_type[std::string(dtype_name(t->dtype))] += t->size_bytes;
    }
  }
  std::string best = "unknown";
  size_t best_bytes = 0;
  for (const auto& [name, bytes] : bytes_per_type) {
    if (bytes > best_bytes) best = name, best_bytes = bytes;
  }
  return best;
}

}  // namespace qs
