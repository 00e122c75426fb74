// Hugging Face safetensors reader (single file or sharded via model.safetensors.index.json).
//
// Format (huggingface/safetensors README): u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the byte buffer; offsets are relative to the end of the header. Supported dtypes: F32, F16,
// BF16. Every offset is checked against the file size and against shape * element size.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "formats/tensor.h"

namespace qs {

class SafetensorsModel {
 public:
  /// Opens `dir`/model.safetensors, or every shard listed in `dir`/model.safetensors.index.json
  /// ("weight_map": tensor name -> shard file). Throws qs::Error naming the file and the problem
  /// (missing file, bad JSON header, unsupported dtype, offsets past end of file, shape/size
  /// mismatch, tensor listed in the index but absent from its shard).
  static SafetensorsModel open_dir(const std::string& dir);
  /// Opens one .safetensors file.
  static SafetensorsModel open_file(const std::string& path);

  /// All tensors, shape outermost first (as stored), data pointing into the mappings.
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const TensorView* find_tensor(const std::string& name) const;
  /// Files opened, and the total of their sizes in bytes.
  const std::vector<std::string>& files() const { return files_; }
  size_t total_file_bytes() const { return total_file_bytes_; }
  /// File a tensor came from (for error messages).
  const std::string& file_of(const std::string& tensor_name) const;

 private:
  void add_file(const std::string& path, const std::vector<std::string>* only_names);
  std::vector<std::shared_ptr<MappedFile>> mappings_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> tensor_file_;
  std::vector<std::string> files_;
  size_t total_file_bytes_ = 0;
};

}  // namespace qs
