// Model quantization: a whole model file to a new GGUF (`qwenserve quantize`), or the loaded
// weights to in-memory quantized copies (`--quantize TYPE` on serve / generate / bench).
//
// Per tensor: each row is decoded to f32 with dequantize_row (any supported input type) and
// encoded with quantize_row (quant/quantize.h) into the type chosen by tensor_type_for
// (quant/quantize_policy.h). A tensor already stored in its target type is copied byte for byte.
// Rows are split over the thread pool; the output is identical for any thread count.
//
// Memory: the file route holds one output tensor at a time (GgufWriter::add_tensor_lazy) plus one
// f32 row per thread; the input stays memory-mapped. Peak resident memory ~ largest output tensor
// (the 4B model's token_embd in Q6_K: ~320 MB).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/tensor.h"
#include "core/thread_pool.h"
#include "model/model_weights.h"
#include "quantize/quantize_policy.h"

namespace qs {

struct LoadedModel;

/// Writes `rows x cols` of `src` (any supported dtype) as `dst_type` into `dst`
/// (src.rows() * row_bytes(dst_type, cols) bytes). Throws qs::Error when cols is not a multiple of
/// dst_type's block size or a type is unsupported.
void convert_tensor(const TensorView& src, DType dst_type, uint8_t* dst, ThreadPool& pool);

struct QuantizeFileOptions {
  QuantMix mix = QuantMix::kQ8_0;
  std::FILE* progress = stderr;  // one line per tensor; nullptr: silent
};

struct QuantizeFileReport {
  size_t input_tensor_bytes = 0;   // bytes of the input's tensors as stored
  size_t output_tensor_bytes = 0;  // bytes of the written tensors (no padding)
  size_t output_file_bytes = 0;    // size of the written file
  int64_t n_tensors = 0;
  std::map<std::string, int64_t> tensors_per_type;  // "Q4_K" -> count
  std::vector<std::string> skipped;                 // input tensors not part of the model
  double seconds = 0;
};

/// Quantizes the model at `in_path` (GGUF file or Hugging Face directory, see load_model) into a
/// GGUF at `out_path` (written via out_path.tmp, renamed when complete). GGUF input: every metadata
/// key is copied except general.alignment, general.file_type and general.quantization_version
/// (set to the mix's llama_ftype and 2). HF input: the keys of quant/hf_gguf_metadata.h, tensors
/// renamed to GGUF names in converter order. Throws qs::Error (bad input, I/O failure).
QuantizeFileReport quantize_model_file(const std::string& in_path, const std::string& out_path,
                                       const QuantizeFileOptions& options, ThreadPool& pool);

/// Quantized copies of a loaded model's weight matrices; 1-D tensors stay the originals'.
struct QuantizedWeights {
  QuantMix mix = QuantMix::kQ8_0;
  std::deque<TensorView> views;            // the new tensors (stable addresses)
  std::vector<std::vector<uint8_t>> data;  // their bytes
  ModelWeights weights;                    // every pointer of the source, remapped
};

/// Quantizes every matrix of `model` (format and names as loaded) with `mix` into RAM. The result
/// keeps pointers to the model's 1-D tensors: `model` must outlive it. Progress (one line per
/// 10% of bytes) goes to `progress` when not null. Throws qs::Error.
std::unique_ptr<QuantizedWeights> quantize_weights(const LoadedModel& model, QuantMix mix,
                                                   ThreadPool& pool, std::FILE* progress);

/// Bytes of the distinct tensors `weights` points to (tied embeddings counted once): llama-bench's
/// "model size".
size_t model_weight_bytes(const ModelWeights& weights);

/// Short name of the weights' type: the mix name ("Q4_K_M") when quantized in memory
/// (`quantized` not null), else the llama_ftype name of GGUF general.file_type when present
/// ("Q8_0", "BF16"), else the type holding the most matrix bytes ("BF16").
std::string describe_weight_type(const LoadedModel& model, const QuantizedWeights* quantized);

}  // namespace qs
