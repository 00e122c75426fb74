// GgufFile against byte streams built by hand from the GGUF spec (ggml docs/gguf.md), so the reader
// is checked against the spec rather than against our own writer.
#include "io/gguf_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/io_test_util.h"

namespace qs {
namespace {

using qs::testing::LeBytes;
using qs::testing::TempDir;
using qs::testing::write_file;

// Value type ids and ggml type ids, as numbered in the spec.
enum : uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kStr, kArr, kU64, kI64, kF64 };
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ8_0 = 8;

LeBytes header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  LeBytes b;
  b.raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  return b;
}

/// Appends a tensor info: dims innermost first, as stored.
void tensor_info(LeBytes& b, const std::string& name, const std::vector<uint64_t>& dims,
                 uint32_t type, uint64_t offset) {
  b.str(name).u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) b.u64(d);
  b.u32(type).u64(offset);
}

/// A file with one F32 tensor "w" of the given dims/type/offset and `data_bytes` of data.
std::string one_tensor_file(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                            size_t data_bytes) {
  LeBytes b = header(1, 0);
  tensor_info(b, "w", dims, type, offset);
  b.pad_to(32);
  b.data.append(data_bytes, '\x01');
  return b.data;
}

/// Opens `path` expecting qs::Error; returns its message (other exception types fail the test).
std::string open_error(const std::string& path) {
  try {
    GgufFile::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "GgufFile::open(" << path << ") did not throw";
  return "";
}

void expect_error(const std::string& path, std::initializer_list<const char*> words) {
  const std::string msg = open_error(path);
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << "message does not start with the path: " << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  for (const char* w : words)
    EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' in: " << msg;
}

/// Every metadata value type, nested arrays, and two tensors; tensor "b" data ends at EOF.
std::string all_types_file() {
  LeBytes b = header(2, 17);
  b.str("t.u8").u32(kU8).u8(200);
  b.str("t.i8").u32(kI8).i8(-100);
  b.str("t.u16").u32(kU16).u16(65000);
  b.str("t.i16").u32(kI16).i16(-30000);
  b.str("t.u32").u32(kU32).u32(4000000000u);
  b.str("t.i32").u32(kI32).i32(-2000000000);
  b.str("t.f32").u32(kF32).f32(1.5f);
  b.str("t.bool").u32(kBool).u8(1);
  b.str("t.str").u32(kStr).str("h\xc3\xa9llo");
  b.str("t.u64").u32(kU64).u64((uint64_t{1} << 63) + 5);
  b.str("t.i64").u32(kI64).i64(-(int64_t{1} << 40));
  b.str("t.f64").u32(kF64).f64(-0.125);
  b.str("t.empty").u32(kStr).str("");
  b.str("t.arr_str").u32(kArr).u32(kStr).u64(3).str("a").str("").str("ccc");
  b.str("t.arr_i32").u32(kArr).u32(kI32).u64(3).i32(1).i32(-2).i32(3);
  b.str("t.arr_f32").u32(kArr).u32(kF32).u64(2).f32(0.5f).f32(-2.0f);
  b.str("t.nested").u32(kArr).u32(kArr).u64(2);
  b.u32(kU32).u64(2).u32(7).u32(8);          // [7, 8]
  b.u32(kU32).u64(0);                        // []
  tensor_info(b, "a", {3, 2}, kGgmlF32, 0);  // shape [2, 3]: 24 bytes, next offset 32
  tensor_info(b, "b", {4}, kGgmlF16, 32);    // 8 bytes
  b.pad_to(32);
  for (int i = 0; i < 6; ++i) b.f32(static_cast<float>(i) + 0.25f);
  b.pad_to(32);
  b.u16(0x3c00).u16(0x4000).u16(0xc000).u16(0x0000);  // f16 1, 2, -2, 0
  return b.data;
}

TEST(GgufReader, ReadsEveryValueTypeAndTensors) {
  TempDir dir;
  const std::string path = write_file(dir.file("all.gguf"), all_types_file());
  const GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 17u);
  EXPECT_EQ(f.find("t.u8")->type, GgufValueType::UINT8);
  EXPECT_EQ(f.get_uint("t.u8"), 200u);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.find("t.i8")->type, GgufValueType::INT8);
  EXPECT_EQ(f.get_uint("t.u16"), 65000u);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_EQ(f.get_float("t.u32"), 4e9);  // integers are accepted as floats
  EXPECT_TRUE(f.get_bool("t.bool"));
  EXPECT_EQ(f.get_string("t.str"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get_uint("t.u64"), (uint64_t{1} << 63) + 5);
  EXPECT_EQ(f.get_int("t.i64"), -(int64_t{1} << 40));
  EXPECT_EQ(f.get_float("t.f64"), -0.125);
  EXPECT_EQ(f.get_string("t.empty"), "");
  EXPECT_EQ(f.get_string_array("t.arr_str"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_int_array("t.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_float_array("t.arr_f32"), (std::vector<double>{0.5, -2.0}));
  EXPECT_EQ(f.get_float_array("t.arr_i32"), (std::vector<double>{1, -2, 3}));
  const GgufValue* nested = f.find("t.nested");
  ASSERT_NE(nested, nullptr);
  const auto& outer = *std::get<std::shared_ptr<GgufArray>>(nested->value);
  EXPECT_EQ(outer.element_type, GgufValueType::ARRAY);
  ASSERT_EQ(outer.values.size(), 2u);
  const auto& first = *std::get<std::shared_ptr<GgufArray>>(outer.values[0].value);
  EXPECT_EQ(first.element_type, GgufValueType::UINT32);
  ASSERT_EQ(first.values.size(), 2u);
  EXPECT_EQ(std::get<uint64_t>(first.values[1].value), 8u);
  EXPECT_TRUE(std::get<std::shared_ptr<GgufArray>>(outer.values[1].value)->values.empty());

  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorView* a = f.find_tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, &f.tensors()[0]);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));  // outermost first
  EXPECT_EQ(a->size_bytes, 24u);
  float values[6];
  std::memcpy(values, a->data, sizeof values);
  EXPECT_EQ(values[0], 0.25f);
  EXPECT_EQ(values[5], 5.25f);
  const TensorView* b = f.find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::F16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(b->size_bytes, 8u);
  EXPECT_EQ(b->data - a->data, 32);
  EXPECT_EQ(b->data + b->size_bytes, a->data + 40);  // ends at the end of the file
  EXPECT_EQ(f.find_tensor("c"), nullptr);
}

TEST(GgufReader, TypedGetterErrors) {
  TempDir dir;
  const std::string path = write_file(dir.file("all.gguf"), all_types_file());
  const GgufFile f = GgufFile::open(path);
  auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message([&] { f.get_string("nope"); }), path + ": metadata key 'nope' missing");
  EXPECT_EQ(message([&] { f.get_string("t.u8"); }),
            path + ": metadata key 't.u8' has type uint8, expected string");
  EXPECT_NE(message([&] { f.get_uint("t.i8"); }).find("negative"), std::string::npos);
  EXPECT_NE(message([&] { f.get_int("t.u64"); }).find("does not fit"), std::string::npos);
  EXPECT_NE(message([&] { f.get_bool("t.str"); }).find("has type string, expected bool"),
            std::string::npos);
  EXPECT_NE(message([&] { f.get_float("t.str"); }).find("has type string"), std::string::npos);
  EXPECT_NE(message([&] {
              f.get_string_array("t.arr_i32");
            }).find("has type array[int32], expected array[string]"),
            std::string::npos);
  EXPECT_NE(message([&] { f.get_int_array("t.arr_str"); }).find("array[string]"),
            std::string::npos);
  EXPECT_NE(message([&] { f.get_int_array("t.nested"); }).find("array[array[uint32]]"),
            std::string::npos);
  EXPECT_FALSE(f.get_string_opt("nope").has_value());
  EXPECT_FALSE(f.get_uint_opt("nope").has_value());
  EXPECT_FALSE(f.get_float_opt("nope").has_value());
  EXPECT_FALSE(f.get_bool_opt("nope").has_value());
  EXPECT_EQ(f.get_uint_opt("t.u16"), 65000u);
  EXPECT_EQ(f.get_bool_opt("t.bool"), true);
  EXPECT_THROW(f.get_bool_opt("t.u8"), Error);
  EXPECT_TRUE(f.has("t.f64"));
  EXPECT_EQ(gguf_type_name(GgufValueType::UINT32), "uint32");
  EXPECT_EQ(gguf_type_name(GgufValueType::STRING), "string");
  EXPECT_EQ(gguf_type_name(GgufValueType::FLOAT64), "float64");
}

TEST(GgufReader, AcceptsVersion2AndCustomAlignment) {
  TempDir dir;
  LeBytes b = header(2, 1, 2);
  b.str("general.alignment").u32(kU32).u32(64);
  tensor_info(b, "x", {32, 2}, kGgmlQ8_0, 0);  // 2 blocks of 34 bytes = 68 -> next at 128
  tensor_info(b, "y", {1}, kGgmlF32, 128);
  b.pad_to(64);
  ASSERT_EQ(b.size(), 192u);  // 131 bytes of header and infos, padded to 64 (not to 32: 160)
  b.data.append(128, '\x11');
  b.f32(3.0f);
  const GgufFile f = GgufFile::open(write_file(dir.file("v2.gguf"), b.data));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  const TensorView* x = f.find_tensor("x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->dtype, DType::Q8_0);
  EXPECT_EQ(x->shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(x->size_bytes, 68u);
  EXPECT_EQ(x->data[0], 0x11);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x->data) % 64, 0u);  // mappings are page aligned
  EXPECT_EQ(x->data, f.find_tensor("y")->data - 128);
  float y;
  std::memcpy(&y, f.find_tensor("y")->data, 4);
  EXPECT_EQ(y, 3.0f);
}

TEST(GgufReader, WrongMagicVersionAndMissingFile) {
  TempDir dir;
  std::string bytes = all_types_file();
  bytes.replace(0, 4, "GGML");
  expect_error(write_file(dir.file("magic.gguf"), bytes), {"not a GGUF file", "'GGML'", "GGUF"});
  expect_error(write_file(dir.file("zip.gguf"), std::string("PK\x03\x04rest", 8)),
               {"not a GGUF file", "50 4b 03 04"});
  expect_error(write_file(dir.file("empty.gguf"), ""), {"truncated", "magic"});
  expect_error(write_file(dir.file("v1.gguf"), header(0, 0, 1).data),
               {"unsupported GGUF version 1"});
  expect_error(write_file(dir.file("v4.gguf"), header(0, 0, 4).data),
               {"unsupported GGUF version 4"});
  expect_error(write_file(dir.file("be.gguf"), header(0, 0, 0x03000000).data), {"big-endian"});
  expect_error(dir.file("absent.gguf"), {"cannot open"});
}

TEST(GgufReader, EveryTruncatedPrefixThrows) {
  TempDir dir;
  const std::string bytes = all_types_file();
  const std::string path = dir.file("cut.gguf");
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_file(path, std::string_view(bytes).substr(0, n));
    const std::string msg = open_error(path);
    ASSERT_EQ(msg.rfind(path + ": ", 0), 0u) << "prefix " << n << ": " << msg;
    const bool says_why = msg.find("truncated") != std::string::npos ||
                          msg.find("past end of file") != std::string::npos;
    EXPECT_TRUE(says_why) << "prefix " << n << ": " << msg;
  }
  write_file(path, bytes);
  EXPECT_NO_THROW(GgufFile::open(path));
}

TEST(GgufReader, TensorDataPastEndOfFile) {
  TempDir dir;
  // 1000 floats declared, 64 bytes present; the data section starts at byte 64.
  const std::string path =
      write_file(dir.file("short.gguf"), one_tensor_file({1000}, kGgmlF32, 0, 64));
  expect_error(path, {"tensor 'w'", "[64, 4064)", "past end of file", "(size 128)"});
  const std::string far =
      write_file(dir.file("far.gguf"), one_tensor_file({4}, kGgmlF32, 1u << 20, 64));
  expect_error(far, {"tensor 'w'", "past end of file"});
  const std::string huge =
      write_file(dir.file("huge.gguf"), one_tensor_file({1u << 30, 1u << 30}, kGgmlF32, 0, 64));
  expect_error(huge, {"tensor 'w'", "past end of file"});
}

TEST(GgufReader, UnknownTensorTypeAndBadShapes) {
  TempDir dir;
  expect_error(write_file(dir.file("t99.gguf"), one_tensor_file({4}, 99, 0, 64)),
               {"tensor 'w'", "type id 99"});
  expect_error(write_file(dir.file("q41.gguf"), one_tensor_file({32}, 3, 0, 64)),
               {"tensor 'w'", "type id 3"});
  expect_error(
      write_file(dir.file("dims5.gguf"), one_tensor_file({1, 1, 1, 1, 1}, kGgmlF32, 0, 64)),
      {"tensor 'w'", "5 dimensions"});
  expect_error(write_file(dir.file("dims0.gguf"), one_tensor_file({}, kGgmlF32, 0, 64)),
               {"tensor 'w'", "0 dimensions"});
  expect_error(write_file(dir.file("zero.gguf"), one_tensor_file({4, 0}, kGgmlF32, 0, 64)),
               {"tensor 'w'", "dimension 1", "is 0"});
  expect_error(write_file(dir.file("neg.gguf"), one_tensor_file({~uint64_t{0}}, kGgmlF32, 0, 64)),
               {"tensor 'w'", "dimension 0"});
  expect_error(write_file(dir.file("ovf.gguf"),
                          one_tensor_file({uint64_t{1} << 40, uint64_t{1} << 40}, kGgmlF32, 0, 64)),
               {"tensor 'w'", "overflows"});
  expect_error(write_file(dir.file("block.gguf"), one_tensor_file({33}, kGgmlQ8_0, 0, 64)),
               {"tensor 'w'", "Q8_0", "33", "block size 32"});
}

TEST(GgufReader, BadAlignmentAndOffsets) {
  TempDir dir;
  expect_error(write_file(dir.file("off.gguf"), one_tensor_file({4}, kGgmlF32, 16, 64)),
               {"tensor 'w'", "offset 16", "not a multiple of the alignment 32"});
  for (uint32_t bad : {0u, 48u}) {
    LeBytes b = header(0, 1);
    b.str("general.alignment").u32(kU32).u32(bad);
    expect_error(write_file(dir.file("align.gguf"), b.data),
                 {"general.alignment", std::to_string(bad).c_str(), "power of two"});
  }
  LeBytes s = header(0, 1);
  s.str("general.alignment").u32(kStr).str("32");
  expect_error(write_file(dir.file("align_str.gguf"), s.data),
               {"general.alignment", "has type string"});
}

TEST(GgufReader, AbsurdLengthsAndCounts) {
  TempDir dir;
  LeBytes key = header(0, 1);
  key.u64(~uint64_t{0}).raw(std::string(20, 'k'));
  expect_error(write_file(dir.file("key.gguf"), key.data),
               {"string length 18446744073709551615", "metadata key", "exceeds"});
  LeBytes value = header(0, 1);
  value.str("k").u32(kStr).u64(uint64_t{1} << 40).raw("xyz");
  expect_error(write_file(dir.file("value.gguf"), value.data),
               {"string length 1099511627776", "metadata key 'k'"});
  LeBytes array = header(0, 1);
  array.str("k").u32(kArr).u32(kU8).u64(uint64_t{1} << 62).raw("xyz");
  expect_error(write_file(dir.file("array.gguf"), array.data), {"array length", "uint8"});
  LeBytes strings = header(0, 1);
  strings.str("k").u32(kArr).u32(kStr).u64(1000).str("a");
  expect_error(write_file(dir.file("strings.gguf"), strings.data), {"array length 1000", "string"});
  expect_error(write_file(dir.file("kv.gguf"), header(0, ~uint64_t{0}).data),
               {"metadata key-value count"});
  expect_error(write_file(dir.file("tc.gguf"), header(~uint64_t{0}, 0).data), {"tensor count"});
  LeBytes tensors = header(1000, 0);
  tensor_info(tensors, "w", {4}, kGgmlF32, 0);
  expect_error(write_file(dir.file("tc2.gguf"), tensors.data), {"tensor count 1000"});
  LeBytes name = header(1, 0);
  name.u64(uint64_t{1} << 50).raw(std::string(40, 'w'));
  expect_error(write_file(dir.file("name.gguf"), name.data), {"string length", "tensor name"});
}

TEST(GgufReader, MalformedMetadataValues) {
  TempDir dir;
  LeBytes type = header(0, 1);
  type.str("k").u32(13).u32(0);
  expect_error(write_file(dir.file("type.gguf"), type.data),
               {"unknown metadata value type 13", "'k'"});
  LeBytes boolean = header(0, 1);
  boolean.str("k").u32(kBool).u8(2);
  expect_error(write_file(dir.file("bool.gguf"), boolean.data), {"bool value 2", "'k'"});
  LeBytes dup = header(0, 2);
  dup.str("k").u32(kU8).u8(1).str("k").u32(kU8).u8(2);
  expect_error(write_file(dir.file("dup.gguf"), dup.data), {"duplicate metadata key 'k'"});
  LeBytes deep = header(0, 1);
  deep.str("k").u32(kArr);
  for (int i = 0; i < 40; ++i) deep.u32(kArr).u64(1);
  deep.u32(kU8).u64(0);
  expect_error(write_file(dir.file("deep.gguf"), deep.data), {"nested", "'k'"});
  LeBytes tensors = header(2, 0);
  tensor_info(tensors, "w", {4}, kGgmlF32, 0);
  tensor_info(tensors, "w", {4}, kGgmlF32, 0);
  tensors.pad_to(32).data.append(32, '\0');
  expect_error(write_file(dir.file("duptensor.gguf"), tensors.data), {"duplicate tensor name 'w'"});
  LeBytes odd = header(1, 0);
  tensor_info(odd, "bad\nname", {1000}, kGgmlF32, 0);
  odd.pad_to(32);
  const std::string msg = open_error(write_file(dir.file("odd.gguf"), odd.data));
  EXPECT_NE(msg.find("tensor 'bad\\x0aname'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace qs
