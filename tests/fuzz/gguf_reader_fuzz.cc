// GGUF reader (io/gguf_reader.h) on arbitrary bytes, then what a model load reads from it: every
// metadata getter, the model config (model_config_from_gguf), the tokenizer.ggml.* vocabulary and
// the first row of each tensor dequantized.
// Invariants: malformed input only ever throws qs::Error; an accepted tensor's byte size equals
// its shape times its type's block layout (computed here in 128 bits), fits in the file, and its
// first and last bytes can be read.
#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "formats/dtype.h"
#include "fuzz_support.h"
#include "io/gguf_reader.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace {

using qs::fuzz::check;

template <typename F>
void ignore_errors(F&& f) {
  try {
    f();
  } catch (const qs::Error&) {
  }
}

std::optional<int32_t> optional_id(const qs::GgufFile& gguf, const char* key) {
  const std::optional<uint64_t> v = gguf.get_uint_opt(key);
  if (!v || *v > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(*v);
}

void check_tensor(const qs::GgufFile& gguf, const qs::TensorView& t) {
  const qs::DTypeInfo& info = qs::dtype_info(t.dtype);
  unsigned __int128 elements = 1;
  for (int64_t d : t.shape) {
    check(d >= 0, "tensor '" + t.name + "' has a negative dimension");
    elements *= static_cast<uint64_t>(d);
    check(elements <= (static_cast<unsigned __int128>(1) << 64), "tensor '" + t.name + "' element count overflows");
  }
  check(elements % info.block_size == 0, "tensor '" + t.name + "' is not a whole number of blocks");
  const unsigned __int128 bytes = elements / info.block_size * info.block_bytes;
  check(bytes == t.size_bytes, "tensor '" + t.name + "' size_bytes disagrees with its shape");
  check(t.size_bytes <= gguf.file_size_bytes(), "tensor '" + t.name + "' larger than the file");
  check(gguf.find_tensor(t.name) == &t, "tensor '" + t.name + "' not found by its name");
  if (t.size_bytes == 0) return;
  volatile uint8_t sink = t.data[0];
  sink = t.data[t.size_bytes - 1];
  (void)sink;
  const int64_t cols = t.cols();
  if (cols > 0 && cols <= 4096 && static_cast<size_t>(cols) % info.block_size == 0) {
    std::vector<float> row(static_cast<size_t>(cols));
    qs::dequantize_row(t.dtype, t.data, row.data(), cols);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = qs::fuzz::write_scratch_file("model.gguf", data, size);
  std::optional<qs::GgufFile> gguf;
  try {
    gguf.emplace(qs::GgufFile::open(path));
  } catch (const qs::Error&) {
    return 0;
  }
  for (const qs::TensorView& t : gguf->tensors()) check_tensor(*gguf, t);
  for (const auto& entry : gguf->metadata()) {
    const std::string& key = entry.first;
    const qs::GgufValue& value = entry.second;
    (void)qs::gguf_type_name(value.type);
    ignore_errors([&] { (void)gguf->get_string(key); });
    ignore_errors([&] { (void)gguf->get_uint(key); });
    ignore_errors([&] { (void)gguf->get_int(key); });
    ignore_errors([&] { (void)gguf->get_float(key); });
    ignore_errors([&] { (void)gguf->get_bool(key); });
    ignore_errors([&] { (void)gguf->get_string_array(key); });
    ignore_errors([&] { (void)gguf->get_int_array(key); });
    ignore_errors([&] { (void)gguf->get_float_array(key); });
  }
  ignore_errors([&] { (void)qs::model_config_from_gguf(*gguf); });
  // The vocabulary as the model loader reads it (model/model_loader.cc load_tokenizer).
  ignore_errors([&] {
    std::vector<int64_t> types;
    if (gguf->has("tokenizer.ggml.token_type")) types = gguf->get_int_array("tokenizer.ggml.token_type");
    std::vector<std::string> merges;
    if (gguf->has("tokenizer.ggml.merges")) merges = gguf->get_string_array("tokenizer.ggml.merges");
    qs::Tokenizer tokenizer(qs::tokenizer_data_from_gguf(
        gguf->get_string_array("tokenizer.ggml.tokens"), std::move(merges), std::move(types),
        optional_id(*gguf, "tokenizer.ggml.bos_token_id"), optional_id(*gguf, "tokenizer.ggml.eos_token_id"),
        optional_id(*gguf, "tokenizer.ggml.padding_token_id")));
    const std::vector<int32_t> ids = tokenizer.encode("Hello, world! <|im_start|>");
    for (int32_t id : ids) check(id >= 0 && id < tokenizer.vocab_size(), "encode gave an id outside the vocabulary");
    check(qs::fuzz::is_valid_utf8(tokenizer.decode(ids)), "decode gave invalid UTF-8");
  });
  return 0;
}
