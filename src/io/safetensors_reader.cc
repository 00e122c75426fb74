// Hugging Face safetensors reader (format: huggingface/safetensors README; sharding:
// transformers' model.safetensors.index.json with a "weight_map" of tensor name -> shard file).
#include "io/safetensors_reader.h"

#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/binary_cursor.h"
#include "io/format_util.h"

namespace qs {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw Error(path + ": " + message);
}

std::optional<DType> dtype_from_name(const std::string& name) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  return std::nullopt;
}

/// A JSON array of non-negative integers that fit int64, or nullopt.
std::optional<std::vector<int64_t>> int_list(const json& j) {
  if (!j.is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const json& x : j) {
    if (!x.is_number_unsigned()) return std::nullopt;
    const uint64_t v = x.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

/// Parses the JSON header of a mapped .safetensors file; returns it and its length in bytes.
std::pair<json, uint64_t> parse_header(const MappedFile& file) {
  const std::string& path = file.path();
  const uint64_t size = file.size_bytes();
  if (size < 8) {
    fail(path, "truncated file: " + std::to_string(size) +
                   " bytes, too short for the 8-byte safetensors header length");
  }
  uint64_t header_len;
  std::memcpy(&header_len, file.data(), sizeof header_len);
  if (header_len > size - 8) {
    fail(path, "header length " + std::to_string(header_len) + " exceeds the file size " +
                   std::to_string(size) + " (truncated file or not a safetensors file)");
  }
  const char* begin = reinterpret_cast<const char*>(file.data()) + 8;
  try {
    return {json::parse(begin, begin + header_len), header_len};
  } catch (const json::exception& e) {
    fail(path, "malformed JSON header: " + printable(e.what(), 400));
  }
}

/// Validates one header entry and returns its view into `buffer` (the bytes after the header).
TensorView parse_entry(const std::string& path, const std::string& name, const json& entry,
                       const uint8_t* buffer, uint64_t buffer_size) {
  const std::string tensor = "tensor '" + printable(name) + "'";
  if (!entry.is_object()) fail(path, tensor + ": header entry is not a JSON object");
  const auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    fail(path, tensor + ": missing or non-string \"dtype\"");
  }
  const std::string dtype_name_text = dtype_it->get<std::string>();
  const std::optional<DType> dtype = dtype_from_name(dtype_name_text);
  if (!dtype) {
    fail(path, tensor + " has unsupported dtype " + printable(dtype_name_text) +
                   " (supported: F32, F16, BF16)");
  }
  const auto shape = int_list(entry.value("shape", json()));
  if (!shape) fail(path, tensor + ": \"shape\" is not a list of non-negative integers");
  const auto offsets = int_list(entry.value("data_offsets", json()));
  if (!offsets || offsets->size() != 2) {
    fail(path, tensor + ": \"data_offsets\" is not a list of two non-negative integers");
  }
  const uint64_t begin = static_cast<uint64_t>((*offsets)[0]);
  const uint64_t end = static_cast<uint64_t>((*offsets)[1]);
  const std::string range = "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
  if (begin > end || end > buffer_size) {
    fail(path, tensor + " data_offsets " + range + " are reversed or past the end of the " +
                   std::to_string(buffer_size) + "-byte data buffer (truncated or corrupt file)");
  }
  const uint64_t element_bytes = dtype_info(*dtype).block_bytes;
  uint64_t expected = element_bytes;
  for (int64_t d : *shape) {
    if (__builtin_mul_overflow(expected, static_cast<uint64_t>(d), &expected)) {
      fail(path, tensor + " shape " + shape_text(*shape) + " size overflows 64 bits");
    }
  }
  if (end - begin != expected) {
    fail(path, tensor + " data_offsets " + range + " hold " + std::to_string(end - begin) +
                   " bytes but shape " + shape_text(*shape) + " of " + dtype_name_text +
                   " needs " + std::to_string(expected) + " (shape/size mismatch)");
  }
  TensorView view{name, *dtype, *shape, buffer + begin, static_cast<size_t>(expected)};
  return view;
}

/// Index file -> {shard file name -> tensor names}, checking every shard exists.
std::map<std::string, std::vector<std::string>> read_index(const fs::path& dir,
                                                           const std::string& index_path) {
  const MappedFile file(index_path);
  json index;
  try {
    index = json::parse(std::string(reinterpret_cast<const char*>(file.data()), file.size_bytes()));
  } catch (const json::exception& e) {
    fail(index_path, "malformed JSON: " + printable(e.what(), 400));
  }
  const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || map_it == index.end() || !map_it->is_object() || map_it->empty()) {
    fail(index_path, "missing or empty \"weight_map\" object");
  }
  std::map<std::string, std::vector<std::string>> shards;
  for (auto it = map_it->begin(); it != map_it->end(); ++it) {
    // A shard is a file of the model directory: no absolute path, no directory part, no "..".
    const std::string name = it->is_string() ? it->get<std::string>() : std::string();
    if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos) {
      fail(index_path, "weight_map entry for tensor '" + printable(it.key()) +
                           "' is not a file name in the model directory");
    }
    shards[it->get<std::string>()].push_back(it.key());
  }
  for (const auto& [shard, names] : shards) {
    std::error_code ec;
    const fs::path shard_path = dir / shard;
    if (!fs::is_regular_file(shard_path, ec)) {
      fail(shard_path.string(), "shard file missing (listed in " + std::string(kIndexFile) +
                                    " for tensor '" + printable(names.front()) + "')");
    }
  }
  return shards;
}

}  // namespace

SafetensorsModel SafetensorsModel::open_dir(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (fs::is_regular_file(root / kSingleFile, ec)) return open_file((root / kSingleFile).string());
  const fs::path index_path = root / kIndexFile;
  if (!fs::exists(index_path, ec)) {
    throw Error(dir + ": no " + std::string(kSingleFile) + " or " + std::string(kIndexFile));
  }
  SafetensorsModel model;
  for (const auto& [shard, names] : read_index(root, index_path.string())) {
    model.add_file((root / shard).string(), &names);
  }
  return model;
}

SafetensorsModel SafetensorsModel::open_file(const std::string& path) {
  SafetensorsModel model;
  model.add_file(path, nullptr);
  return model;
}

void SafetensorsModel::add_file(const std::string& path,
                                const std::vector<std::string>* only_names) {
  auto file = std::make_shared<MappedFile>(path);
  const auto [header, header_len] = parse_header(*file);
  if (!header.is_object()) fail(path, "JSON header is not an object");
  const uint8_t* buffer = file->data() + 8 + header_len;
  const uint64_t buffer_size = file->size_bytes() - 8 - header_len;
  std::map<std::string, TensorView> found;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    found.emplace(it.key(), parse_entry(path, it.key(), it.value(), buffer, buffer_size));
  }
  if (only_names != nullptr) {
    std::map<std::string, TensorView> wanted;
    for (const std::string& name : *only_names) {
      auto it = found.find(name);
      if (it == found.end()) {
        fail(path, "tensor '" + printable(name) + "' listed in " + std::string(kIndexFile) +
                       " is missing from this shard");
      }
      wanted.insert(std::move(*it));
    }
    found = std::move(wanted);
  }
  for (auto& [name, view] : found) {
    if (tensor_file_.count(name) != 0) {
      fail(path, "tensor '" + printable(name) + "' is also in " + tensor_file_[name]);
    }
    tensor_file_.emplace(name, path);
    tensors_.emplace(name, std::move(view));
  }
  mappings_.push_back(std::move(file));
  files_.push_back(path);
  total_file_bytes_ += mappings_.back()->size_bytes();
}

const TensorView* SafetensorsModel::find_tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const std::string& SafetensorsModel::file_of(const std::string& tensor_name) const {
  const auto it = tensor_file_.find(tensor_name);
  if (it == tensor_file_.end()) throw Error("unknown tensor '" + printable(tensor_name) + "'");
  return it->second;
}

}  // namespace qs
