// SafetensorsModel against files built by hand from the safetensors format (huggingface/safetensors
// README: u64 header length, JSON header, byte buffer) and the transformers shard index.
#include "io/safetensors_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/io_test_util.h"

namespace qs {
namespace {

using qs::testing::LeBytes;
using qs::testing::TempDir;
using qs::testing::write_file;

/// u64 header length, header, buffer.
std::string st_bytes(const std::string& header, const std::string& buffer) {
  LeBytes b;
  b.u64(header.size()).raw(header).raw(buffer);
  return b.data;
}

std::string entry(const std::string& dtype, const std::string& shape, size_t begin, size_t end) {
  return "{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

/// One F32 tensor "x" with the given entry fields and `buffer_bytes` bytes of data.
std::string one_tensor(const std::string& dtype, const std::string& shape, size_t begin, size_t end,
                       size_t buffer_bytes) {
  return st_bytes("{\"x\":" + entry(dtype, shape, begin, end) + "}",
                  std::string(buffer_bytes, 'z'));
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no qs::Error thrown";
  return "";
}

void expect_words(const std::string& msg, const std::string& prefix,
                  std::initializer_list<const char*> words) {
  EXPECT_EQ(msg.rfind(prefix + ": ", 0), 0u)
      << "message does not start with " << prefix << ": " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const char* w : words) {
    EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' in: " << msg;
  }
}

void expect_file_error(const std::string& path, std::initializer_list<const char*> words) {
  expect_words(error_of([&] { SafetensorsModel::open_file(path); }), path, words);
}

/// a: F32 [2, 2]; b: BF16 [3]; c: F16 scalar. Header padded with spaces as HF does.
std::string good_file() {
  std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},\"a\":" + entry("F32", "[2,2]", 0, 16) +
      ",\"b\":" + entry("BF16", "[3]", 16, 22) + ",\"c\":" + entry("F16", "[]", 22, 24) + "}";
  while (header.size() % 8 != 0) header += ' ';
  LeBytes buffer;
  for (int i = 0; i < 4; ++i) buffer.f32(static_cast<float>(i) + 0.5f);
  buffer.u16(0x3f80).u16(0x4000).u16(0xbf80);  // bf16 1, 2, -1
  buffer.u16(0x3c00);                          // f16 1
  return st_bytes(header, buffer.data);
}

TEST(SafetensorsReader, ReadsSingleFile) {
  TempDir dir;
  const std::string path = write_file(dir.file("model.safetensors"), good_file());
  for (const SafetensorsModel& m :
       {SafetensorsModel::open_dir(dir.path().string()), SafetensorsModel::open_file(path)}) {
    ASSERT_EQ(m.tensors().size(), 3u);
    EXPECT_EQ(m.files(), std::vector<std::string>{path});
    EXPECT_EQ(m.total_file_bytes(), good_file().size());
    const TensorView* a = m.find_tensor("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->name, "a");
    EXPECT_EQ(a->dtype, DType::F32);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(a->size_bytes, 16u);
    float f[4];
    std::memcpy(f, a->data, sizeof f);
    EXPECT_EQ(f[3], 3.5f);
    const TensorView* b = m.find_tensor("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->dtype, DType::BF16);
    EXPECT_EQ(b->data - a->data, 16);
    uint16_t bits;
    std::memcpy(&bits, b->data + 4, 2);
    EXPECT_EQ(bf16_to_fp32(bits), -1.0f);
    const TensorView* c = m.find_tensor("c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->dtype, DType::F16);
    EXPECT_TRUE(c->shape.empty());
    EXPECT_EQ(c->size_bytes, 2u);
    EXPECT_EQ(m.find_tensor("__metadata__"), nullptr);
    EXPECT_EQ(m.file_of("b"), path);
    EXPECT_THROW(m.file_of("nope"), Error);
  }
}

TEST(SafetensorsReader, ReadsShardedIndex) {
  TempDir dir;
  write_file(dir.file("model-00001-of-00002.safetensors"),
             st_bytes("{\"a\":" + entry("F32", "[1]", 0, 4) + "}", std::string(4, '\0')));
  write_file(dir.file("model-00002-of-00002.safetensors"),
             st_bytes("{\"b\":" + entry("F16", "[2]", 0, 4) +
                          ",\"unlisted\":" + entry("F16", "[1]", 4, 6) + "}",
                      std::string(6, '\0')));
  write_file(dir.file("model.safetensors.index.json"),
             R"({"metadata": {"total_size": 8}, "weight_map": {
                 "a": "model-00001-of-00002.safetensors",
                 "b": "model-00002-of-00002.safetensors"}})");
  const SafetensorsModel m = SafetensorsModel::open_dir(dir.path().string());
  EXPECT_EQ(m.tensors().size(), 2u);
  EXPECT_EQ(m.files(), (std::vector<std::string>{dir.file("model-00001-of-00002.safetensors"),
                                                 dir.file("model-00002-of-00002.safetensors")}));
  EXPECT_EQ(m.file_of("b"), dir.file("model-00002-of-00002.safetensors"));
  EXPECT_EQ(m.find_tensor("b")->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(m.find_tensor("unlisted"), nullptr);
}

TEST(SafetensorsReader, MalformedHeaders) {
  TempDir dir;
  const std::string json = write_file(dir.file("json.safetensors"), st_bytes("{\"x\": [1,", ""));
  expect_file_error(json, {"malformed JSON header:"});
  const std::string array = write_file(dir.file("array.safetensors"), st_bytes("[1, 2]", ""));
  expect_file_error(array, {"not an object"});
  LeBytes long_header;
  long_header.u64(1000).raw("{}");
  const std::string too_long = write_file(dir.file("long.safetensors"), long_header.data);
  expect_file_error(too_long, {"header length 1000", "exceeds the file size 10"});
  LeBytes huge_header;
  huge_header.u64(~uint64_t{0}).raw("{}");
  expect_file_error(write_file(dir.file("huge.safetensors"), huge_header.data),
                    {"header length 18446744073709551615"});
  expect_file_error(write_file(dir.file("short.safetensors"), "abc"), {"truncated"});
  expect_file_error(dir.file("absent.safetensors"), {"cannot open"});
}

TEST(SafetensorsReader, BadTensorEntries) {
  TempDir dir;
  auto check = [&](const std::string& bytes, std::initializer_list<const char*> words) {
    expect_file_error(write_file(dir.file("t.safetensors"), bytes), words);
  };
  check(one_tensor("F32", "[2,2]", 0, 400, 16), {"tensor 'x'", "[0, 400)", "past the end"});
  check(one_tensor("F32", "[2,2]", 16, 8, 16), {"tensor 'x'", "[16, 8)", "reversed"});
  check(one_tensor("F32", "[2,3]", 0, 16, 16), {"tensor 'x'", "shape/size mismatch", "[2, 3]"});
  check(one_tensor("BF16", "[4]", 0, 16, 16), {"tensor 'x'", "hold 16 bytes", "needs 8"});
  check(one_tensor("I64", "[2]", 0, 16, 16), {"tensor 'x'", "unsupported dtype I64"});
  check(one_tensor("F8_E4M3", "[16]", 0, 16, 16), {"tensor 'x'", "unsupported dtype F8_E4M3"});
  check(one_tensor("F32", "[-1]", 0, 16, 16), {"tensor 'x'", "\"shape\""});
  check(one_tensor("F32", "[4294967296,4294967296,4294967296]", 0, 16, 16), {"overflows"});
  check(st_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd"),
        {"tensor 'x'", "\"data_offsets\""});
  check(st_bytes(R"({"x":{"shape":[1],"data_offsets":[0,4]}})", "abcd"), {"\"dtype\""});
  check(st_bytes(R"({"x":7})", ""), {"tensor 'x'", "not a JSON object"});
}

TEST(SafetensorsReader, EveryTruncatedPrefixThrows) {
  TempDir dir;
  const std::string bytes = good_file();
  const std::string path = dir.file("cut.safetensors");
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_file(path, std::string_view(bytes).substr(0, n));
    const std::string msg = error_of([&] { SafetensorsModel::open_file(path); });
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "prefix " << n << ": " << msg;
  }
}

TEST(SafetensorsReader, ShardProblems) {
  TempDir dir;
  const std::string index = dir.file("model.safetensors.index.json");
  expect_words(error_of([&] { SafetensorsModel::open_dir(dir.path().string()); }),
               dir.path().string(), {"no model.safetensors or model.safetensors.index.json"});
  write_file(index, R"({"weight_map": {"a": "shard1.safetensors"}})");
  const std::string shard = dir.file("shard1.safetensors");
  expect_words(error_of([&] { SafetensorsModel::open_dir(dir.path().string()); }), shard,
               {"shard file missing", "tensor 'a'"});
  write_file(shard, st_bytes("{\"b\":" + entry("F32", "[1]", 0, 4) + "}", std::string(4, '\0')));
  expect_words(error_of([&] { SafetensorsModel::open_dir(dir.path().string()); }), shard,
               {"tensor 'a'", "missing from this shard"});
  write_file(index, R"({"weight_map": )");
  expect_words(error_of([&] { SafetensorsModel::open_dir(dir.path().string()); }), index,
               {"malformed JSON"});
  write_file(index, R"({"metadata": {}})");
  expect_words(error_of([&] { SafetensorsModel::open_dir(dir.path().string()); }), index,
               {"weight_map"});
  write_file(index, R"({"weight_map": {"a": 3}})");
  expect_words(error_of([&] { SafetensorsModel::open_dir(dir.path().string()); }), index,
               {"tensor 'a'"});
  // Shards outside the model directory are refused (the fuzz target's invariant, issue 16).
  for (const std::string outside : {"../shard1.safetensors", "sub/../shard1.safetensors", "/etc/passwd", "..", "a\\\\b"}) {
    write_file(index, R"({"weight_map": {"a": ")" + outside + R"("}})");
    expect_words(error_of([&] { SafetensorsModel::open_dir(dir.path().string()); }), index,
                 {"tensor 'a'", "not a file name in the model directory"});
  }
}

}  // namespace
}  // namespace qs
