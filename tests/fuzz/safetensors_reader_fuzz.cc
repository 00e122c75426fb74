// Safetensors reader (io/safetensors_reader.h), single file and sharded. The input is split by
// FuzzedDataProvider: a mode byte, then for a single file its bytes; for a sharded model the
// model.safetensors.index.json text followed by two shard files, "a.safetensors" and
// "b.safetensors" (the index may name any file).
// Invariants: malformed input only throws qs::Error; an accepted tensor's byte size equals its
// shape times its element size (F32/F16/BF16), fits in its file, and its bytes can be read; every
// file opened is in the model directory.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "formats/dtype.h"
#include "fuzz_support.h"
#include "io/safetensors_reader.h"

namespace {

using qs::fuzz::check;

void check_model(const qs::SafetensorsModel& model, const std::string& dir) {
  // Shards come from the model directory only: an index naming "/etc/passwd" or "../x" is refused.
  for (const std::string& file : model.files()) {
    check(std::filesystem::path(file).parent_path() == std::filesystem::path(dir), "opened a file outside the model directory: " + file);
  }
  for (const auto& [name, t] : model.tensors()) {
    check(name == t.name, "tensor map key differs from the tensor's name");
    unsigned __int128 bytes = qs::dtype_info(t.dtype).block_bytes;
    check(qs::dtype_info(t.dtype).block_size == 1, "safetensors tensor with a block-quantized type");
    for (int64_t d : t.shape) {
      check(d >= 0, "tensor '" + name + "' has a negative dimension");
      bytes *= static_cast<uint64_t>(d);
      check(bytes <= (static_cast<unsigned __int128>(1) << 64), "tensor '" + name + "' byte count overflows");
    }
    check(bytes == t.size_bytes, "tensor '" + name + "' size_bytes disagrees with its shape");
    check(t.size_bytes <= model.total_file_bytes(), "tensor '" + name + "' larger than its files");
    check(model.find_tensor(name) == &t, "tensor '" + name + "' not found by its name");
    (void)model.file_of(name);
    if (t.size_bytes > 0) {
      volatile uint8_t sink = t.data[0];
      sink = t.data[t.size_bytes - 1];
      (void)sink;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool sharded = in.ConsumeBool();
  const std::string dir = qs::fuzz::scratch_dir() + "/st";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::optional<qs::SafetensorsModel> model;
  try {
    if (!sharded) {
      const std::vector<uint8_t> bytes = in.ConsumeRemainingBytes<uint8_t>();
      qs::fuzz::write_scratch_file("st/model.safetensors", bytes.data(), bytes.size());
      model.emplace(qs::SafetensorsModel::open_dir(dir));
    } else {
      qs::fuzz::write_scratch_file("st/model.safetensors.index.json", in.ConsumeRandomLengthString(1 << 16));
      const std::string shard_a = in.ConsumeRandomLengthString(1 << 16);
      qs::fuzz::write_scratch_file("st/a.safetensors", shard_a);
      const std::vector<uint8_t> shard_b = in.ConsumeRemainingBytes<uint8_t>();
      qs::fuzz::write_scratch_file("st/b.safetensors", shard_b.data(), shard_b.size());
      model.emplace(qs::SafetensorsModel::open_dir(dir));
    }
  } catch (const qs::Error&) {
    return 0;
  }
  check_model(*model, dir);
  return 0;
}
