// GGUF parsing and validation (GGUF spec: ggml docs/gguf.md). Metadata getters: gguf_metadata.cc.
#include "io/gguf_reader.h"

#include <cstdio>
#include <limits>
#include <set>
#include <utility>

#include "core/error.h"
#include "io/binary_cursor.h"
#include "io/format_util.h"

namespace qs {
namespace {

constexpr uint32_t kMaxValueType = static_cast<uint32_t>(GgufValueType::FLOAT64);
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;               // empty key, type, one-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset

struct GgufHeader {
  uint32_t version = 0;
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
};

struct RawTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // innermost first, as stored
  uint32_t type_id = 0;
  uint64_t offset = 0;  // relative to the start of the data section
};

/// Bytes of the smallest possible encoding of one value of `type` (bounds array lengths).
uint64_t min_value_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
      return 2;
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::FLOAT32:
      return 4;
    case GgufValueType::ARRAY:
      return 4 + 8;
    default:  // 64-bit scalars and strings (u64 length)
      return 8;
  }
}

std::string hex_bytes(std::string_view bytes) {
  std::string out;
  char buf[4];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof buf, "%s%02x", out.empty() ? "" : " ", c);
    out += buf;
  }
  return out;
}

uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

GgufValueType read_value_type(BinaryCursor& cur, const char* what) {
  const size_t at = cur.offset();
  const uint32_t raw = cur.read<uint32_t>(what);
  if (raw > kMaxValueType) {
    cur.fail("unknown metadata value type " + std::to_string(raw) + " at offset " +
             std::to_string(at));
  }
  return static_cast<GgufValueType>(raw);
}

GgufValue read_value(BinaryCursor& cur, GgufValueType type, int depth);

std::shared_ptr<GgufArray> read_array(BinaryCursor& cur, int depth) {
  if (depth > kGgufMaxArrayNesting) {
    cur.fail("arrays nested more than " + std::to_string(kGgufMaxArrayNesting) + " levels deep");
  }
  auto array = std::make_shared<GgufArray>();
  array->element_type = read_value_type(cur, "array element type");
  const size_t at = cur.offset();
  const uint64_t count = cur.read<uint64_t>("array length");
  const uint64_t min_bytes = min_value_bytes(array->element_type);
  if (count > cur.remaining() / min_bytes) {
    cur.fail("array length " + std::to_string(count) + " of " +
             gguf_type_name(array->element_type) + " at offset " + std::to_string(at) +
             " needs at least " + std::to_string(min_bytes) + " bytes per element but only " +
             std::to_string(cur.remaining()) + " bytes are left (truncated or corrupt)");
  }
  // Grow as elements are actually read: memory stays proportional to the bytes consumed.
  array->values.reserve(std::min<uint64_t>(count, 1u << 16));
  for (uint64_t i = 0; i < count; ++i) {
    array->values.push_back(read_value(cur, array->element_type, depth));
  }
  return array;
}

GgufValue read_value(BinaryCursor& cur, GgufValueType type, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::UINT8: v.value = uint64_t{cur.read<uint8_t>("uint8 value")}; break;
    case GgufValueType::INT8: v.value = int64_t{cur.read<int8_t>("int8 value")}; break;
    case GgufValueType::UINT16: v.value = uint64_t{cur.read<uint16_t>("uint16 value")}; break;
    case GgufValueType::INT16: v.value = int64_t{cur.read<int16_t>("int16 value")}; break;
    case GgufValueType::UINT32: v.value = uint64_t{cur.read<uint32_t>("uint32 value")}; break;
    case GgufValueType::INT32: v.value = int64_t{cur.read<int32_t>("int32 value")}; break;
    case GgufValueType::UINT64: v.value = cur.read<uint64_t>("uint64 value"); break;
    case GgufValueType::INT64: v.value = cur.read<int64_t>("int64 value"); break;
    case GgufValueType::FLOAT32: v.value = double{cur.read<float>("float32 value")}; break;
    case GgufValueType::FLOAT64: v.value = cur.read<double>("float64 value"); break;
    case GgufValueType::STRING: v.value = cur.string("string value"); break;
    case GgufValueType::ARRAY: v.value = read_array(cur, depth + 1); break;
    case GgufValueType::BOOL: {
      const size_t at = cur.offset();
      const uint8_t b = cur.read<uint8_t>("bool value");
      if (b > 1) {
        cur.fail("bool value " + std::to_string(b) + " at offset " + std::to_string(at) +
                 " is neither 0 nor 1");
      }
      v.value = b == 1;
      break;
    }
  }
  return v;
}

GgufHeader read_header(BinaryCursor& cur) {
  const std::string_view magic = cur.bytes(4, "GGUF magic");
  if (magic != "GGUF") {
    cur.fail("not a GGUF file: magic is '" + printable(magic) + "' (bytes " + hex_bytes(magic) +
             "), expected 'GGUF' (47 47 55 46)");
  }
  GgufHeader h;
  h.version = cur.read<uint32_t>("version");
  if (h.version == 0x02000000u || h.version == 0x03000000u) {
    cur.fail("big-endian GGUF files are not supported (version field " +
             std::to_string(h.version) + ")");
  }
  if (h.version != 2 && h.version != 3) {
    cur.fail("unsupported GGUF version " + std::to_string(h.version) + " (supported: 2, 3)");
  }
  h.n_tensors = cur.read<uint64_t>("tensor count");
  h.n_kv = cur.read<uint64_t>("metadata key-value count");
  if (h.n_kv > cur.remaining() / kMinKvBytes) {
    cur.fail("metadata key-value count " + std::to_string(h.n_kv) + " is impossible: only " +
             std::to_string(cur.remaining()) + " bytes are left (truncated or corrupt)");
  }
  if (h.n_tensors > cur.remaining() / kMinTensorInfoBytes) {
    cur.fail("tensor count " + std::to_string(h.n_tensors) + " is impossible: only " +
             std::to_string(cur.remaining()) + " bytes are left (truncated or corrupt)");
  }
  return h;
}

std::map<std::string, GgufValue> read_metadata(BinaryCursor& cur, uint64_t count) {
  std::map<std::string, GgufValue> out;
  for (uint64_t i = 0; i < count; ++i) {
    cur.set_context("(metadata entry " + std::to_string(i) + ")");
    const size_t at = cur.offset();
    std::string key = cur.string("metadata key");
    cur.set_context("(metadata key '" + printable(key) + "')");
    const GgufValueType type = read_value_type(cur, "metadata value type");
    GgufValue value = read_value(cur, type, 0);
    if (out.count(key) != 0) {
      cur.set_context("");
      cur.fail("duplicate metadata key '" + printable(key) + "' at offset " + std::to_string(at));
    }
    out.emplace(std::move(key), std::move(value));
  }
  cur.set_context("");
  return out;
}

/// general.alignment (uint32 by the spec; any integer type accepted), default 32.
uint64_t alignment_from(const std::map<std::string, GgufValue>& metadata, BinaryCursor& cur) {
  const auto it = metadata.find("general.alignment");
  if (it == metadata.end()) return kGgufDefaultAlignment;
  const GgufValue& v = it->second;
  std::string shown;  // the value as stored, for the message
  uint64_t alignment = 0;
  if (const auto* u = std::get_if<uint64_t>(&v.value)) {
    alignment = *u;
    shown = std::to_string(*u);
  } else if (const auto* s = std::get_if<int64_t>(&v.value)) {
    alignment = *s > 0 ? static_cast<uint64_t>(*s) : 0;
    shown = std::to_string(*s);
  } else {
    cur.fail("metadata key 'general.alignment' has type " + gguf_type_name(v.type) +
             ", expected uint32");
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (uint64_t{1} << 30)) {
    cur.fail("invalid general.alignment " + shown + " (must be a power of two, at most 2^30)");
  }
  return alignment;
}

RawTensorInfo read_tensor_info(BinaryCursor& cur, uint64_t index) {
  RawTensorInfo info;
  cur.set_context("(tensor info " + std::to_string(index) + ")");
  info.name = cur.string("tensor name");
  cur.set_context("(tensor '" + printable(info.name) + "')");
  const uint32_t n_dims = cur.read<uint32_t>("tensor dimension count");
  if (n_dims == 0 || n_dims > kMaxDims) {
    cur.set_context("");
    cur.fail("tensor '" + printable(info.name) + "' has " + std::to_string(n_dims) +
             " dimensions, expected 1 to " + std::to_string(kMaxDims));
  }
  for (uint32_t d = 0; d < n_dims; ++d) info.dims.push_back(cur.read<uint64_t>("tensor dimension"));
  info.type_id = cur.read<uint32_t>("tensor type");
  info.offset = cur.read<uint64_t>("tensor data offset");
  cur.set_context("");
  return info;
}

std::vector<RawTensorInfo> read_tensor_infos(BinaryCursor& cur, uint64_t count) {
  if (count > cur.remaining() / kMinTensorInfoBytes) {
    cur.fail("tensor count " + std::to_string(count) + " is impossible: only " +
             std::to_string(cur.remaining()) +
             " bytes are left after the metadata (truncated or corrupt)");
  }
  std::vector<RawTensorInfo> infos;
  infos.reserve(count);
  std::set<std::string> names;
  for (uint64_t i = 0; i < count; ++i) {
    infos.push_back(read_tensor_info(cur, i));
    if (!names.insert(infos.back().name).second) {
      cur.fail("duplicate tensor name '" + printable(infos.back().name) + "'");
    }
  }
  return infos;
}

/// Shape (outermost first) of `info`, checking each dim is 1..2^63-1 and the product fits int64.
std::vector<int64_t> checked_shape(const RawTensorInfo& info, const BinaryCursor& cur) {
  const std::string tensor = "tensor '" + printable(info.name) + "'";
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (size_t i = 0; i < info.dims.size(); ++i) {
    const uint64_t d = info.dims[i];
    if (d == 0 || d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      cur.fail(tensor + " dimension " + std::to_string(i) + " (innermost first) is " +
               std::to_string(d) + ", expected 1 to 2^63-1");
    }
    if (__builtin_mul_overflow(n, static_cast<int64_t>(d), &n)) {
      cur.fail(tensor + " element count overflows 64 bits");
    }
    shape.insert(shape.begin(), static_cast<int64_t>(d));
  }
  return shape;
}

TensorView make_tensor_view(const RawTensorInfo& info, uint64_t data_start, uint64_t alignment,
                            const MappedFile& file, const BinaryCursor& cur) {
  const std::string tensor = "tensor '" + printable(info.name) + "'";
  const std::optional<DTypeInfo> dt = dtype_info_from_ggml_id(info.type_id);
  if (!dt) cur.fail(tensor + " has unknown or unsupported type id " + std::to_string(info.type_id));
  TensorView view;
  view.name = info.name;
  view.dtype = dt->dtype;
  view.shape = checked_shape(info, cur);
  const std::string described = tensor + " (" + std::string(dt->name) + " " +
                                shape_text(view.shape) + ")";
  if (info.dims[0] % dt->block_size != 0) {
    cur.fail(described + " row length " + std::to_string(info.dims[0]) +
             " is not a multiple of the block size " + std::to_string(dt->block_size));
  }
  if (info.offset % alignment != 0) {
    cur.fail(described + " data offset " + std::to_string(info.offset) +
             " is not a multiple of the alignment " + std::to_string(alignment));
  }
  const uint64_t file_size = file.size_bytes();
  const uint64_t blocks = static_cast<uint64_t>(view.n_elements()) / dt->block_size;
  uint64_t size = 0;
  const bool size_overflows = __builtin_mul_overflow(blocks, dt->block_bytes, &size);
  const uint64_t begin = sat_add(data_start, info.offset);
  const uint64_t end = size_overflows ? std::numeric_limits<uint64_t>::max() : sat_add(begin, size);
  if (end > file_size) {
    const bool saturated = end == std::numeric_limits<uint64_t>::max();
    cur.fail(described + " data [" + std::to_string(begin) + ", " +
             (saturated ? std::string("beyond 2^64") : std::to_string(end)) +
             ") past end of file (size " + std::to_string(file_size) + ")");
  }
  view.size_bytes = row_bytes(dt->dtype, view.n_elements());
  view.data = file.data() + begin;
  return view;
}

}  // namespace

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.file_ = std::make_shared<MappedFile>(path);
  BinaryCursor cur(f.file_->data(), f.file_->size_bytes(), path);
  const GgufHeader header = read_header(cur);
  f.version_ = header.version;
  f.metadata_ = read_metadata(cur, header.n_kv);
  f.alignment_ = alignment_from(f.metadata_, cur);
  const std::vector<RawTensorInfo> infos = read_tensor_infos(cur, header.n_tensors);
  const uint64_t data_start = align_up(cur.offset(), f.alignment_);
  f.tensors_.reserve(infos.size());
  for (const RawTensorInfo& info : infos) {
    f.tensor_index_.emplace(info.name, f.tensors_.size());
    f.tensors_.push_back(make_tensor_view(info, data_start, f.alignment_, *f.file_, cur));
  }
  return f;
}

const TensorView* GgufFile::find_tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace qs
