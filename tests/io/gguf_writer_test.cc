// GgufWriter: byte-exact output against the GGUF spec, and GgufWriter -> GgufFile round trips.
#include "io/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "support/io_test_util.h"

namespace qs {
namespace {

using qs::testing::LeBytes;
using qs::testing::TempDir;
using qs::testing::write_file;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(GgufWriter, WritesSpecBytes) {
  TempDir dir;
  GgufWriter w;
  w.add_string("general.architecture", "qwen3");
  w.add_uint32("qwen3.block_count", 2);
  w.add_string_array("tok", {"a", "bc"});
  w.add_tensor("w", DType::F32, {2, 1}, f32_bytes({1.0f, -1.0f}));
  w.add_tensor("v", DType::F16, {3}, {1, 2, 3, 4, 5, 6});
  const std::string path = dir.file("spec.gguf");
  w.write(path);

  LeBytes b;
  b.raw("GGUF").u32(3).u64(2).u64(3);
  b.str("general.architecture").u32(8).str("qwen3");
  b.str("qwen3.block_count").u32(4).u32(2);
  b.str("tok").u32(9).u32(8).u64(2).str("a").str("bc");
  b.str("w").u32(2).u64(1).u64(2).u32(0).u64(0);  // dims innermost first: [1, 2]
  b.str("v").u32(1).u64(3).u32(1).u64(32);        // 8 bytes of "w" padded to 32
  b.pad_to(32);
  b.f32(1.0f).f32(-1.0f).pad_to(32);
  b.raw(std::string("\x01\x02\x03\x04\x05\x06", 6)).pad_to(32);
  EXPECT_EQ(read_all(path), b.data);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(GgufWriter, RoundTripsEveryMetadataType) {
  TempDir dir;
  GgufWriter w;
  w.add_uint8("u8", 255);
  w.add_int8("i8", -128);
  w.add_uint16("u16", 65535);
  w.add_int16("i16", -32768);
  w.add_uint32("u32", 4294967295u);
  w.add_int32("i32", -2147483647 - 1);
  w.add_uint64("u64", ~uint64_t{0});
  w.add_int64("i64", std::numeric_limits<int64_t>::min());
  w.add_float32("f32", 0.1f);
  w.add_float64("f64", 0.1);
  w.add_bool("yes", true);
  w.add_bool("no", false);
  w.add_string("s", std::string("nul\0inside", 10));
  w.add_string_array("sa", {"x", "", "zz"});
  w.add_int32_array("i32a", {-1, 0, 7});
  w.add_int64_array("i64a", {int64_t{1} << 40});
  w.add_uint32_array("u32a", {});
  w.add_float32_array("f32a", {1.5f, -0.25f});
  w.add_float64_array("f64a", {1e-300});
  auto inner = std::make_shared<GgufArray>();
  inner->element_type = GgufValueType::INT16;
  inner->values.push_back(GgufValue{GgufValueType::INT16, int64_t{-5}});
  auto outer = std::make_shared<GgufArray>();
  outer->element_type = GgufValueType::ARRAY;
  outer->values.push_back(GgufValue{GgufValueType::ARRAY, inner});
  w.add_value("nested", GgufValue{GgufValueType::ARRAY, outer});
  const std::string path = dir.file("meta.gguf");
  w.write(path);

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_FALSE(f.has("general.alignment"));  // default alignment is not written
  EXPECT_EQ(f.get_uint("u8"), 255u);
  EXPECT_EQ(f.get_int("i8"), -128);
  EXPECT_EQ(f.get_uint("u16"), 65535u);
  EXPECT_EQ(f.get_int("i16"), -32768);
  EXPECT_EQ(f.get_uint("u32"), 4294967295u);
  EXPECT_EQ(f.get_int("i32"), -2147483647 - 1);
  EXPECT_EQ(f.get_uint("u64"), ~uint64_t{0});
  EXPECT_EQ(f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.find("f32")->type, GgufValueType::FLOAT32);
  EXPECT_EQ(f.get_float("f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f.get_float("f64"), 0.1);
  EXPECT_TRUE(f.get_bool("yes"));
  EXPECT_FALSE(f.get_bool("no"));
  EXPECT_EQ(f.get_string("s"), std::string("nul\0inside", 10));
  EXPECT_EQ(f.get_string_array("sa"), (std::vector<std::string>{"x", "", "zz"}));
  EXPECT_EQ(f.get_int_array("i32a"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(f.get_int_array("i64a"), (std::vector<int64_t>{int64_t{1} << 40}));
  EXPECT_TRUE(f.get_int_array("u32a").empty());
  EXPECT_EQ(f.get_float_array("f32a"), (std::vector<double>{1.5, -0.25}));
  EXPECT_EQ(f.get_float_array("f64a"), (std::vector<double>{1e-300}));
  const auto& read_outer = *std::get<std::shared_ptr<GgufArray>>(f.find("nested")->value);
  const auto& read_inner = *std::get<std::shared_ptr<GgufArray>>(read_outer.values.at(0).value);
  EXPECT_EQ(read_inner.element_type, GgufValueType::INT16);
  EXPECT_EQ(std::get<int64_t>(read_inner.values.at(0).value), -5);
}

TEST(GgufWriter, RoundTripsTensorsWithCustomAlignment) {
  TempDir dir;
  GgufWriter w(64);
  const std::vector<float> floats = {1, 2, 3, 4, 5, 6};
  w.add_tensor("f32", DType::F32, {2, 3}, f32_bytes(floats));
  std::vector<uint8_t> q8(2 * 34, 0x5a);
  w.add_tensor_view("q8", DType::Q8_0, {64}, q8.data(), q8.size());
  w.add_tensor_lazy("bf16", DType::BF16, {2, 2, 2}, [](uint8_t* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(i);
  });
  w.add_tensor("q4k", DType::Q4_K, {1, 256}, std::vector<uint8_t>(144, 0x33));
  const std::string path = dir.file("tensors.gguf");
  w.write(path);

  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_uint("general.alignment"), 64u);
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.tensors()[0].name, "f32");
  EXPECT_EQ(f.tensors()[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(f.tensors()[0].data, floats.data(), 24), 0);
  const TensorView* q = f.find_tensor("q8");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::Q8_0);
  EXPECT_EQ(q->size_bytes, 68u);
  EXPECT_EQ(std::memcmp(q->data, q8.data(), q8.size()), 0);
  const TensorView* bf = f.find_tensor("bf16");
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(bf->shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(bf->data[15], 15);
  const TensorView* q4 = f.find_tensor("q4k");
  ASSERT_NE(q4, nullptr);
  EXPECT_EQ(q4->dtype, DType::Q4_K);
  EXPECT_EQ(q4->shape, (std::vector<int64_t>{1, 256}));
  for (const TensorView& t : f.tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u) << t.name;
  }
  EXPECT_EQ(f.file_size_bytes() % 64, 0u);
}

TEST(GgufWriter, TruncatedOutputAlwaysThrows) {
  TempDir dir;
  GgufWriter w;
  w.add_string_array("tokens", {"a", "b"});
  w.add_tensor("x", DType::F32, {4}, f32_bytes({1, 2, 3, 4}));
  w.add_tensor("y", DType::F32, {8}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));  // fills its 32 bytes
  const std::string full = dir.file("full.gguf");
  w.write(full);
  const std::string bytes = read_all(full);
  const std::string cut = dir.file("cut.gguf");
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_file(cut, std::string_view(bytes).substr(0, n));
    EXPECT_THROW(GgufFile::open(cut), Error) << "prefix " << n;
  }
}

TEST(GgufWriter, RejectsInvalidInput) {
  GgufWriter w;
  w.add_uint8("k", 1);
  EXPECT_NE(error_of([&] { w.add_string("k", "again"); }).find("'k': added twice"),
            std::string::npos);
  w.add_tensor("t", DType::F32, {2}, f32_bytes({1, 2}));
  EXPECT_NE(error_of([&] {
              w.add_tensor("t", DType::F32, {2}, f32_bytes({1, 2}));
            }).find("tensor 't' added twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("s", DType::F32, {3}, f32_bytes({1, 2}));
            }).find("has 8 bytes, expected 12"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("s", DType::Q8_0, {2, 33}, {});
            }).find("block size 32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { w.add_tensor("s", DType::F32, {}, {}); }).find("0 dimensions"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("s", DType::F32, {1, 1, 1, 1, 1}, {});
            }).find("5 dimensions"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_tensor("s", DType::F32, {2, 0}, {});
            }).find("dimension of 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              w.add_value("v", GgufValue{GgufValueType::UINT8, uint64_t{300}});
            }).find("out of range for uint8"),
            std::string::npos);
  EXPECT_THROW(w.add_value("v", GgufValue{GgufValueType::INT32, uint64_t{3}}), Error);
  EXPECT_THROW(w.add_value("v", GgufValue{GgufValueType::STRING, 1.0}), Error);
  EXPECT_THROW(w.add_value("v", GgufValue{GgufValueType::ARRAY, std::shared_ptr<GgufArray>()}),
               Error);
  auto mixed = std::make_shared<GgufArray>();
  mixed->element_type = GgufValueType::STRING;
  mixed->values.push_back(GgufValue{GgufValueType::UINT8, uint64_t{1}});
  EXPECT_THROW(w.add_value("v", GgufValue{GgufValueType::ARRAY, mixed}), Error);
  EXPECT_THROW(w.add_tensor(std::string(65, 'n'), DType::F32, {2}, f32_bytes({1, 2})), Error);
  EXPECT_NO_THROW(w.add_tensor(std::string(64, 'n'), DType::F32, {2}, f32_bytes({1, 2})));
  EXPECT_THROW(w.add_tensor_view("nodata", DType::F32, {2}, nullptr, 8), Error);
  EXPECT_THROW(w.add_uint32("general.alignment", 64), Error);
  EXPECT_NO_THROW(w.add_uint32("general.alignment", 32));
  EXPECT_THROW(GgufWriter(48), Error);
  EXPECT_THROW(GgufWriter(4), Error);
  EXPECT_THROW(GgufWriter(0), Error);
}

TEST(GgufWriter, WriteFailureNamesThePath) {
  TempDir dir;
  GgufWriter w;
  w.add_tensor_lazy("t", DType::F32, {2}, [](uint8_t*, size_t) { throw Error("fill failed"); });
  const std::string path = dir.file("out.gguf");
  EXPECT_EQ(error_of([&] { w.write(path); }), "fill failed");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_FALSE(std::filesystem::exists(path));
  const std::string missing = dir.file("no/such/dir/out.gguf");
  const std::string msg = error_of([&] { GgufWriter().write(missing); });
  EXPECT_EQ(msg.rfind(missing + ": ", 0), 0u) << msg;
}

}  // namespace
}  // namespace qs
