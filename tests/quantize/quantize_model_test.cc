// `qwenserve quantize` library: the per-tensor type policy, and a GGUF written by
// quantize_model_file read back with GgufFile: every tensor's bytes equal quantize_row applied here
// to the input rows, metadata copied, re-quantizing is byte-identical (any thread count), and the
// in-memory route (--quantize) produces the same bytes as the file route.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "support/io_test_util.h"
#include "model/model_loader.h"
#include "quantize/model_quantizer.h"
#include "formats/quantize.h"

namespace qs {
namespace {

using qs::testing::TempDir;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(QuantizePolicy, ParsesEveryMixName) {
  for (const std::string& name : quant_mix_names()) {
    const auto mix = parse_quant_mix(name);
    ASSERT_TRUE(mix.has_value()) << name;
    EXPECT_EQ(quant_mix_name(*mix), name);
  }
  EXPECT_FALSE(parse_quant_mix("q4_k_s").has_value());
  EXPECT_EQ(quant_mix_file_type(QuantMix::kQ4_K_M), 15u);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(quant_mix_file_type(QuantMix::kQ8_0), 7u);
  EXPECT_EQ(file_type_name(17).value_or(""), "Q5_K_M");
}

TEST(QuantizePolicy, Q4KMFollowsLlamaCppForA36LayerModel) {
  // llama.cpp use_more_bits for 36 layers, written out by hand: the first 4 (n/8), the last 5
  // (>= 7n/8 = 31) and every third from layer 6.
  const std::set<int> more = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 31, 32, 33, 34, 35};
  const std::vector<int64_t> mat = {2560, 9728};
  for (int layer = 0; layer < 36; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    const DType bumped = more.count(layer) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, p + "attn_v.weight", {1024, 2560}, 36, true), bumped);
    EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, p + "ffn_down.weight", mat, 36, true), bumped);
    EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, p + "ffn_up.weight", {9728, 2560}, 36, true), DType::Q4_K);
    EXPECT_EQ(tensor_type_for(QuantMix::kQ5_K_M, p + "attn_q.weight", {4096, 2560}, 36, true), DType::Q5_K);
    EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, p + "attn_norm.weight", {2560}, 36, true), DType::F32);
  }
  const std::vector<int64_t> embd = {151936, 2560};
  EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, "token_embd.weight", embd, 36, true), DType::Q6_K);
  EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, "token_embd.weight", embd, 36, false), DType::Q4_K);
  EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, "output.weight", embd, 36, false), DType::Q6_K);
  EXPECT_EQ(tensor_type_for(QuantMix::kQ4_0, "output.weight", embd, 36, false), DType::Q6_K);
  EXPECT_EQ(tensor_type_for(QuantMix::kQ8_0, "output.weight", embd, 36, false), DType::Q8_0);
  EXPECT_EQ(tensor_type_for(QuantMix::kBF16, "output.weight", embd, 36, false), DType::BF16);
}

TEST(QuantizePolicy, RowsNotMultipleOfTheBlockFallBack) {
  EXPECT_EQ(fallback_type(DType::Q4_K, 64, QuantMix::kQ4_K_M), DType::Q4_0);
  EXPECT_EQ(fallback_type(DType::Q5_K, 96, QuantMix::kQ5_K_M), DType::Q8_0);
  EXPECT_EQ(fallback_type(DType::Q6_K, 128, QuantMix::kQ6_K), DType::Q8_0);
  EXPECT_EQ(fallback_type(DType::Q8_0, 48, QuantMix::kQ8_0), DType::F16);
  EXPECT_EQ(fallback_type(DType::Q4_K, 40, QuantMix::kQ4_K_M), DType::F16);
  EXPECT_EQ(fallback_type(DType::BF16, 40, QuantMix::kBF16), DType::BF16);
  EXPECT_EQ(fallback_type(DType::Q4_K, 512, QuantMix::kQ4_K_M), DType::Q4_K);
  // Through tensor_type_for: the tiny test model's 64-wide rows.
  EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, "output.weight", {1000, 64}, 2, false), DType::Q8_0);
  EXPECT_EQ(tensor_type_for(QuantMix::kQ4_K_M, "blk.0.ffn_up.weight", {128, 64}, 2, false), DType::Q4_0);
}

// A Qwen3 model small enough for a unit test but with 256-multiple rows (K-quants apply):
// hidden 256, intermediate 512, 2 layers, 2 heads of 128, 1 KV head, vocab 96, untied.
struct TinyModel {
  static constexpr int64_t kHidden = 256, kInter = 512, kHeadDim = 128, kVocab = 96;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  std::vector<std::vector<float>> values;

  TinyModel() {
    auto add = [this](const std::string& name, std::vector<int64_t> shape) {
      shapes.emplace_back(name, shape);
    };
    add("token_embd.weight", {kVocab, kHidden});
    for (int l = 0; l < 2; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      add(p + "attn_norm.weight", {kHidden});
      add(p + "attn_q.weight", {2 * kHeadDim, kHidden});
      add(p + "attn_k.weight", {kHeadDim, kHidden});
      add(p + "attn_v.weight", {kHeadDim, kHidden});
      add(p + "attn_output.weight", {kHidden, 2 * kHeadDim});
      add(p + "attn_q_norm.weight", {kHeadDim});
      add(p + "attn_k_norm.weight", {kHeadDim});
      add(p + "ffn_norm.weight", {kHidden});
      add(p + "ffn_gate.weight", {kInter, kHidden});
      add(p + "ffn_up.weight", {kInter, kHidden});
      add(p + "ffn_down.weight", {kHidden, kInter});
    }
    add("output_norm.weight", {kHidden});
    add("output.weight", {kVocab, kHidden});
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (const auto& [name, shape] : shapes) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float>& v = values.emplace_back(static_cast<size_t>(n));
      for (float& x : v) x = shape.size() == 1 ? 1.0f + normal(rng) : normal(rng);
    }
  }

  void write(const std::string& path) const {
    GgufWriter w;
    w.add_string("general.architecture", "qwen3");
    w.add_string("general.name", "quantize test");
    w.add_uint32("qwen3.block_count", 2);
    w.add_uint32("qwen3.context_length", 4096);
    w.add_uint32("qwen3.embedding_length", kHidden);
    w.add_uint32("qwen3.feed_forward_length", kInter);
    w.add_uint32("qwen3.attention.head_count", 2);
    w.add_uint32("qwen3.attention.head_count_kv", 1);
    w.add_uint32("qwen3.attention.key_length", kHeadDim);
    w.add_uint32("qwen3.attention.value_length", kHeadDim);
    w.add_float32("qwen3.rope.freq_base", 1e6f);
    w.add_float32("qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_uint32("general.file_type", 0);
    w.add_string("tokenizer.chat_template", "{{ messages }}");
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
    w.add_int32_array("tokenizer.ggml.token_type", {1, 1, 3});
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::vector<uint8_t> bytes(values[i].size() * sizeof(float));
      std::memcpy(bytes.data(), values[i].data(), bytes.size());
      w.add_tensor(shapes[i].first, DType::F32, shapes[i].second, std::move(bytes));
    }
    w.write(path);
  }
};

TEST(QuantizeModelFile, WritesQuantizeRowBytesAndCopiesMetadata) {
  TempDir dir;
  const TinyModel model;
  const std::string in = dir.file("in.gguf"), out = dir.file("out.gguf");
  model.write(in);
  ThreadPool pool(2);
  QuantizeFileOptions options;
  options.mix = QuantMix::kQ4_K_M;
  options.progress = nullptr;
  const QuantizeFileReport report = quantize_model_file(in, out, options, pool);
  EXPECT_EQ(report.n_tensors, static_cast<int64_t>(model.shapes.size()));

  const GgufFile input = GgufFile::open(in);
  const GgufFile q = GgufFile::open(out);
  ASSERT_EQ(q.tensors().size(), model.shapes.size());
  // Types written out by hand for 2 layers: use_more_bits(1, 2) holds (1 >= 7 * 2 / 8), layer 0
  // does not; output -> Q6_K; 1-D -> F32; the rest Q4_K.
  auto expected_type = [](const std::string& name, size_t rank) {
    if (rank == 1) return DType::F32;
    if (name == "output.weight" || name == "blk.1.attn_v.weight" || name == "blk.1.ffn_down.weight") {
      return DType::Q6_K;
    }
    return DType::Q4_K;
  };
  size_t bytes_total = 0;
  for (size_t i = 0; i < model.shapes.size(); ++i) {
    const auto& [name, shape] = model.shapes[i];
    const TensorView& t = q.tensors()[i];
    EXPECT_EQ(t.name, name);
    EXPECT_EQ(t.shape, shape);
    const DType type = expected_type(name, shape.size());
    ASSERT_EQ(t.dtype, type) << name;
    const int64_t cols = shape.back(), rows = static_cast<int64_t>(model.values[i].size()) / cols;
    std::vector<uint8_t> expected(rows * row_bytes(type, cols));
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(type, model.values[i].data() + r * cols, expected.data() + r * row_bytes(type, cols), cols);
    }
    ASSERT_EQ(t.size_bytes, expected.size()) << name;
    EXPECT_EQ(std::memcmp(t.data, expected.data(), expected.size()), 0) << name;
    bytes_total += expected.size();
  }
  EXPECT_EQ(report.output_tensor_bytes, bytes_total);

  EXPECT_EQ(q.get_uint("general.file_type"), 15u);
  EXPECT_EQ(q.get_uint("general.quantization_version"), 2u);
  for (const auto& [key, value] : input.metadata()) {
    if (key == "general.file_type") continue;
    ASSERT_TRUE(q.has(key)) << key;
  }
  EXPECT_EQ(q.get_string("tokenizer.chat_template"), "{{ messages }}");
  EXPECT_EQ(q.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(q.get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(q.get_float("qwen3.rope.freq_base"), 1e6);
  EXPECT_EQ(q.get_string("general.name"), "quantize test");
}

TEST(QuantizeModelFile, RequantizingIsByteIdenticalForAnyThreadCount) {
  TempDir dir;
  TinyModel().write(dir.file("in.gguf"));
  for (QuantMix mix : {QuantMix::kQ8_0, QuantMix::kQ5_K_M, QuantMix::kQ6_K, QuantMix::kBF16}) {
    QuantizeFileOptions options;
    options.mix = mix;
    options.progress = nullptr;
    ThreadPool one(1), two(2);
    quantize_model_file(dir.file("in.gguf"), dir.file("a.gguf"), options, one);
    quantize_model_file(dir.file("in.gguf"), dir.file("b.gguf"), options, two);
    const std::string a = read_all(dir.file("a.gguf"));
    EXPECT_GT(a.size(), 0u);
    EXPECT_EQ(a, read_all(dir.file("b.gguf"))) << quant_mix_name(mix);
  }
}

TEST(QuantizeModelFile, QuantizingAQuantizedFileToItsOwnTypeCopiesBytes) {
  TempDir dir;
  TinyModel().write(dir.file("in.gguf"));
  QuantizeFileOptions options;
  options.mix = QuantMix::kQ6_K;
  options.progress = nullptr;
  ThreadPool pool(2);
  quantize_model_file(dir.file("in.gguf"), dir.file("q6.gguf"), options, pool);
  quantize_model_file(dir.file("q6.gguf"), dir.file("q6_again.gguf"), options, pool);
  const GgufFile a = GgufFile::open(dir.file("q6.gguf"));
  const GgufFile b = GgufFile::open(dir.file("q6_again.gguf"));
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    ASSERT_EQ(a.tensors()[i].size_bytes, b.tensors()[i].size_bytes);
    EXPECT_EQ(std::memcmp(a.tensors()[i].data, b.tensors()[i].data, a.tensors()[i].size_bytes), 0);
  }
}

TEST(QuantizeWeights, InMemoryMatchesTheFileRoute) {
  TempDir dir;
  TinyModel().write(dir.file("in.gguf"));
  QuantizeFileOptions options;
  options.mix = QuantMix::kQ4_K_M;
  options.progress = nullptr;
  ThreadPool pool(2);
  quantize_model_file(dir.file("in.gguf"), dir.file("q.gguf"), options, pool);
  const auto file_model = load_model(dir.file("q.gguf"));
  const auto model = load_model(dir.file("in.gguf"));
  const auto mem = quantize_weights(*model, QuantMix::kQ4_K_M, pool, nullptr);
  auto same = [](const TensorView* a, const TensorView* b) {
    return a->dtype == b->dtype && a->size_bytes == b->size_bytes &&
           std::memcmp(a->data, b->data, a->size_bytes) == 0;
  };
  EXPECT_TRUE(same(mem->weights.embed_tokens, file_model->weights.embed_tokens));
  EXPECT_TRUE(same(mem->weights.lm_head, file_model->weights.lm_head));
  for (size_t l = 0; l < 2; ++l) {
    const LayerWeights& a = mem->weights.layers[l];
    const LayerWeights& b = file_model->weights.layers[l];
    EXPECT_TRUE(same(a.q_proj, b.q_proj));
    EXPECT_TRUE(same(a.v_proj, b.v_proj));
    EXPECT_TRUE(same(a.down_proj, b.down_proj));
    EXPECT_TRUE(same(a.up_proj, b.up_proj));
    EXPECT_EQ(a.attn_norm, model->weights.layers[l].attn_norm);  // 1-D tensors are not copied
  }
  EXPECT_EQ(model_weight_bytes(mem->weights), model_weight_bytes(file_model->weights));
  EXPECT_EQ(describe_weight_type(*file_model, nullptr), "Q4_K_M");
  EXPECT_EQ(describe_weight_type(*model, mem.get()), "Q4_K_M");
}

TEST(MappedFileLoadOptions, NoMmapReadsTheSameBytesIntoRam) {
  TempDir dir;
  std::string bytes(100000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  const std::string path = qs::testing::write_file(dir.file("f.bin"), bytes);
  for (const MapOptions options : {MapOptions{false, false}, MapOptions{true, false},
                                   MapOptions{true, true}, MapOptions{false, true}}) {
    const MappedFile f(path, options);  // mlock may fail (RLIMIT_MEMLOCK): a warning, not an error
    ASSERT_EQ(f.size_bytes(), bytes.size());
    EXPECT_EQ(f.in_ram(), options.no_mmap);
    EXPECT_EQ(std::memcmp(f.data(), bytes.data(), bytes.size()), 0);
    if (!options.mlock) EXPECT_FALSE(f.locked());
  }
  // The process default is what MappedFile(path) and hence the model readers use.
  MappedFile::set_default_options(MapOptions{true, false});
  EXPECT_TRUE(MappedFile(path).in_ram());
  MappedFile::set_default_options(MapOptions{});
  EXPECT_FALSE(MappedFile(path).in_ram());
}

TEST(QuantizeModelFile, UnknownInputFailsWithThePath) {
  TempDir dir;
  ThreadPool pool(1);
  QuantizeFileOptions options;
  options.progress = nullptr;
  try {
    quantize_model_file(dir.file("missing.gguf"), dir.file("o.gguf"), options, pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.gguf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qs
