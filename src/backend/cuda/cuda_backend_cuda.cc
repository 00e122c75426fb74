// The CUDA backend (cuda_backend.h): host code driving the kernels of kernels.h and the cuBLASLt
// GEMMs of gemm.h on one stream.
//
// Step, per layer (Qwen3; Qwen2 adds the fused q/k/v bias and has no q/k norm):
//   h = bf16(rms_norm(x) * attn_norm)                       rms_norm
//   qkv = h . Wqkv^T                       f32 [T, q+2kv]   cuBLASLt
//   q = rope(q_norm(q)); K/V cache <- rope(k_norm(k)), v     qk_norm_rope_kv_write (slot_mapping)
//   a = paged_attention(q, K, V)           bf16 [T, q]      split-KV
//   x += a . Wo^T                                           cuBLASLt, beta = 1
//   h = bf16(rms_norm(x) * ffn_norm); gu = h . Wgate|up^T; act = silu(g) * u; x += act . Wdown^T
// logits = bf16(rms_norm(x[logits_indices]) * final_norm) . Wlm^T  (f32 [n_logits, vocab])
// launch() enqueues all of it; wait() uploads the sampling rows (masks may be filled until then),
// samples on the device and copies back ids, logprobs and only the logits rows that were asked for.
// CUDA graphs: a decode step (one token per sequence) is padded to its bucket (step_plan.h) and
// laid out in a buffer of fixed address and sizes (block tables as wide as the context limit,
// attention splits planned for the context limit); the first step of a bucket runs eagerly and is
// then captured, later ones replay the graph. Mixed and prefill steps, steps above the largest
// bucket and --enforce-eager run eagerly. Growing a buffer a graph points to drops the graphs.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/step_plan.h"
#include "core/error.h"
#include "core/log.h"
#include "formats/dtype.h"
#include "kv/kv_types.h"
#include "sampling/logits_processing.h"
#include "sampling/sampling_params.h"

namespace qs {
namespace {

using cuda::check;

// Device memory owned by one object; freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes > 0) check(cudaMalloc(&ptr_, bytes), what);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (for asynchronous copies).
class PinnedBuffer {
 public:
  void reserve(size_t bytes) {
    if (bytes <= bytes_) return;
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
    check(cudaMallocHost(&ptr_, bytes), "cudaMallocHost");
    bytes_ = bytes;
  }
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceLayer {
  DeviceBuffer attn_norm, qkv, qkv_bias, q_norm, k_norm, o, ffn_norm, gate_up, down;
};

bool is_plain_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Rows of `parts`, stacked, converted to bf16 on the host and copied to the device.
DeviceBuffer upload_bf16_matrix(std::initializer_list<const TensorView*> parts, bool& warned) {
  int64_t cols = -1, rows = 0;
  for (const TensorView* t : parts) {
    if (cols >= 0 && t->cols() != cols) throw Error("cuda backend: fused tensors of different widths ('" + t->name + "')");
    cols = t->cols();
    rows += t->rows();
    if (!is_plain_float(t->dtype) && !warned) {
      process_log::warning("cuda backend: quantized " + std::string(dtype_name(t->dtype)) + " weights ('" + t->name +
                           "') are dequantized to bf16 at load (no quantized GPU path yet)");
      warned = true;
    }
  }
  std::vector<uint16_t> host(static_cast<size_t>(rows * cols));
  std::vector<float> row(static_cast<size_t>(cols));
  size_t at = 0;
  for (const TensorView* t : parts) {
    const size_t rb = row_bytes(t->dtype, cols);
    for (int64_t r = 0; r < t->rows(); ++r) {
      dequantize_row(t->dtype, t->data + static_cast<size_t>(r) * rb, row.data(), cols);
      for (int64_t c = 0; c < cols; ++c) host[at++] = fp32_to_bf16(row[c]);
    }
  }
  DeviceBuffer out(host.size() * sizeof(uint16_t), "cudaMalloc(weights)");
  check(cudaMemcpy(out.as<void>(), host.data(), out.bytes(), cudaMemcpyHostToDevice), "copy weights");
  return out;
}

// 1-D tensors (norms, biases), concatenated, as f32 on the device; empty when parts[0] is null.
DeviceBuffer upload_f32_vector(std::initializer_list<const TensorView*> parts) {
  std::vector<float> host;
  for (const TensorView* t : parts) {
    if (t == nullptr) return {};
    const size_t at = host.size();
    host.resize(at + static_cast<size_t>(t->n_elements()));
    dequantize_row(t->dtype, t->data, host.data() + at, t->n_elements());
  }
  DeviceBuffer out(host.size() * sizeof(float), "cudaMalloc(vectors)");
  check(cudaMemcpy(out.as<void>(), host.data(), out.bytes(), cudaMemcpyHostToDevice), "copy vectors");
  return out;
}

cuda::KvType kv_type_of(KvDType dtype) {
  switch (dtype) {
    case KvDType::kF32: return cuda::KvType::kF32;
    case KvDType::kF16: return cuda::KvType::kF16;
    case KvDType::kBF16: return cuda::KvType::kBF16;
    case KvDType::kQ8_0: break;
  }
  throw Error("cuda backend: --kv-cache-type q8_0 is not supported on CUDA (use bf16, f16 or f32)");
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {
    check(cudaSetDevice(options.device), "cudaSetDevice");
    check(cudaGetDeviceProperties(&props_, options.device), "cudaGetDeviceProperties");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    gemm_ = std::make_unique<cuda::LtGemm>();
  }
  ~CudaBackend() override {
    drop_graphs();
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }

  std::string_view name() const override { return "cuda"; }
  std::string describe() const override {
    return std::string("cuda (") + props_.name + ", sm_" + std::to_string(props_.major) + std::to_string(props_.minor) +
           ", " + std::to_string(props_.multiProcessorCount) +
           " SMs): gemm=cublasLt-bf16 attention=split-kv-simple sampling=device graphs=" +
           (options_.enforce_eager ? "off (--enforce-eager)" : "decode buckets");
  }
  bool batch_invariant() const override { return false; }

  void prepare(const ModelConfig& config, const ModelWeights& weights, const BackendLimits& limits) override;
  size_t kv_bytes_per_block(KvDType dtype) const override { return kv_bytes_per_block_dense(cfg(), dtype); }
  int32_t kv_blocks_for_device_memory(KvDType dtype) const override;
  void allocate_kv(int32_t n_blocks, KvDType dtype) override;
  int32_t kv_blocks() const override { return kv_blocks_; }
  size_t kv_allocated_bytes() const override { return kv_.bytes(); }
  const BackendLimits& limits() const override { return limits_; }
  int32_t vocab_rows() const override { return static_cast<int32_t>(cfg().vocab_size); }
  void launch(const StepBatch& batch, const SamplingBatch& sampling, StepOutput& out) override;
  void wait() override;

 private:
  const ModelConfig& cfg() const {
    if (config_ == nullptr) throw Error("cuda backend: prepare() was not called");
    return *config_;
  }
  // Device pointers and plan of one packed step (eager or graph buffer).
  struct StepView {
    cuda_plan::PackedLayout layout;
    const int32_t* ints = nullptr;
    cuda_plan::KvSplitPlan split;
    int32_t n_tokens = 0, n_logits = 0;
  };
  void ensure_logits_rows(int32_t rows);
  void drop_graphs();
  void forward(const StepBatch& batch);
  void enqueue_model(const StepView& v);
  void sample(const SamplingBatch& sampling, StepOutput& out);

  CudaBackendOptions options_;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<cuda::LtGemm> gemm_;
  const ModelConfig* config_ = nullptr;
  BackendLimits limits_;

  // Weights (bf16 matrices, f32 vectors).
  DeviceBuffer embed_, lm_head_, final_norm_;
  const uint16_t* lm_head_ptr_ = nullptr;  // embed_ when tied
  std::vector<DeviceLayer> layers_;

  // KV: [layer][K|V][n_blocks, n_kv_heads, kKvBlockSize, head_dim].
  DeviceBuffer kv_;
  int32_t kv_blocks_ = 0;
  cuda::KvType kv_type_ = cuda::KvType::kBF16;
  size_t kv_layer_bytes_ = 0;  // bytes of one layer's K (= V)

  // Activations, sized for max_batch_tokens rows.
  DeviceBuffer step_ints_, x_, h_, qkv_, q_, attn_, gate_up_, act_, att_m_, att_l_, att_acc_;
  int32_t att_rows_ = 0;  // (token, split) rows of the attention scratch
  // Logits and sampling, sized for logits_rows_ rows (grown on demand).
  int32_t logits_rows_ = 0;
  DeviceBuffer logits_h_, logits_, processed_, counts_, sampled_, sampled_logprob_;
  DeviceBuffer sampling_misc_;  // rows | masks | history | bias of the step being sampled
  PinnedBuffer pinned_ints_, pinned_sampling_, pinned_out_;
  std::vector<int32_t> packed_;
  // CUDA graphs of decode buckets, replayed on graph_ints_ (sized for the largest bucket).
  std::vector<int32_t> buckets_;
  std::map<int32_t, cudaGraphExec_t> graphs_;
  DeviceBuffer graph_ints_;
  int32_t graph_table_width_ = 0;

  std::exception_ptr error_;
  const SamplingBatch* pending_sampling_ = nullptr;
  StepOutput* pending_out_ = nullptr;
};

void CudaBackend::prepare(const ModelConfig& config, const ModelWeights& weights, const BackendLimits& limits) {
  if (limits.max_batch_tokens < 1 || limits.max_context_tokens < 1 || limits.max_seqs < 1) {
    throw Error("cuda backend: batch, context and sequence limits must be positive");
  }
  if (config.head_dim % 2 != 0 || config.head_dim > 512) {
    throw Error("cuda backend: head_dim " + std::to_string(config.head_dim) + " must be even and <= 512");
  }
  if (config.num_attention_heads / config.num_key_value_heads > 64) {
    throw Error("cuda backend: more than 64 query heads per KV head are not supported");
  }
  config_ = &config;
  limits_ = limits;
  bool warned = false;
  embed_ = upload_bf16_matrix({weights.embed_tokens}, warned);
  if (weights.lm_head == weights.embed_tokens) {
    lm_head_ptr_ = embed_.as<uint16_t>();
  } else {
    lm_head_ = upload_bf16_matrix({weights.lm_head}, warned);
    lm_head_ptr_ = lm_head_.as<uint16_t>();
  }
  final_norm_ = upload_f32_vector({weights.final_norm});
  layers_.clear();
  layers_.reserve(weights.layers.size());
  for (const LayerWeights& l : weights.layers) {
    DeviceLayer d;
    d.attn_norm = upload_f32_vector({l.attn_norm});
    d.qkv = upload_bf16_matrix({l.q_proj, l.k_proj, l.v_proj}, warned);
    d.qkv_bias = upload_f32_vector({l.q_bias, l.k_bias, l.v_bias});
    d.q_norm = upload_f32_vector({l.q_norm});
    d.k_norm = upload_f32_vector({l.k_norm});
    d.o = upload_bf16_matrix({l.o_proj}, warned);
    d.ffn_norm = upload_f32_vector({l.ffn_norm});
    d.gate_up = upload_bf16_matrix({l.gate_proj, l.up_proj}, warned);
    d.down = upload_bf16_matrix({l.down_proj}, warned);
    layers_.push_back(std::move(d));
  }
  const auto t = static_cast<size_t>(limits.max_batch_tokens);
  const size_t hidden = config.hidden_size, qkv_w = config.q_dim() + 2 * config.kv_dim();
  x_ = DeviceBuffer(t * hidden * sizeof(float), "cudaMalloc(x)");
  h_ = DeviceBuffer(t * hidden * sizeof(uint16_t), "cudaMalloc(h)");
  qkv_ = DeviceBuffer(t * qkv_w * sizeof(float), "cudaMalloc(qkv)");
  q_ = DeviceBuffer(t * config.q_dim() * sizeof(uint16_t), "cudaMalloc(q)");
  attn_ = DeviceBuffer(t * config.q_dim() * sizeof(uint16_t), "cudaMalloc(attn)");
  gate_up_ = DeviceBuffer(t * 2 * config.intermediate_size * sizeof(float), "cudaMalloc(gate_up)");
  act_ = DeviceBuffer(t * config.intermediate_size * sizeof(uint16_t), "cudaMalloc(act)");
  // Attention partials: enough (token, split) rows for max_batch_tokens unsplit tokens or 256
  // split rows (a split plan never exceeds this; see launch()).
  att_rows_ = static_cast<int32_t>(std::max<int64_t>(limits.max_batch_tokens, 256));
  const size_t heads = config.num_attention_heads;
  att_m_ = DeviceBuffer(att_rows_ * heads * sizeof(float), "cudaMalloc(attention m)");
  att_l_ = DeviceBuffer(att_rows_ * heads * sizeof(float), "cudaMalloc(attention l)");
  att_acc_ = DeviceBuffer(att_rows_ * heads * config.head_dim * sizeof(float), "cudaMalloc(attention acc)");
  ensure_logits_rows(std::min<int32_t>(static_cast<int32_t>(std::min<int64_t>(limits.max_batch_tokens, INT32_MAX)),
                                       std::max<int32_t>(limits.max_seqs, 1)));
  drop_graphs();
  buckets_ = cuda_plan::graph_buckets(static_cast<int32_t>(std::min<int64_t>(limits.max_seqs, limits.max_batch_tokens)));
  graph_table_width_ = static_cast<int32_t>((limits.max_context_tokens + kKvBlockSize - 1) / kKvBlockSize);
  const size_t b = buckets_.back();
  graph_ints_ = DeviceBuffer((5 * b + b * graph_table_width_ + b) * sizeof(int32_t), "cudaMalloc(graph step)");
}

void CudaBackend::drop_graphs() {
  for (auto& [bucket, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

void CudaBackend::ensure_logits_rows(int32_t rows) {
  if (rows <= logits_rows_) return;
  check(cudaStreamSynchronize(stream_), "synchronize before growing the logits buffers");
  drop_graphs();  // they point to the old buffers
  const size_t r = rows, vocab = cfg().vocab_size;
  logits_h_ = DeviceBuffer(r * cfg().hidden_size * sizeof(uint16_t), "cudaMalloc(logits input)");
  logits_ = DeviceBuffer(r * vocab * sizeof(float), "cudaMalloc(logits)");
  processed_ = DeviceBuffer(r * vocab * sizeof(float), "cudaMalloc(processed logits)");
  counts_ = DeviceBuffer(r * vocab * sizeof(int32_t), "cudaMalloc(penalty counts)");
  sampled_ = DeviceBuffer(r * sizeof(int32_t), "cudaMalloc(sampled)");
  sampled_logprob_ = DeviceBuffer(r * sizeof(float), "cudaMalloc(sampled logprob)");
  logits_rows_ = rows;
}

int32_t CudaBackend::kv_blocks_for_device_memory(KvDType dtype) const {
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const int32_t blocks = cuda_plan::kv_cache_blocks(total_bytes, free_bytes, options_.gpu_memory_utilization,
                                                    kv_bytes_per_block(dtype));
  if (blocks < 1) {
    throw Error("cuda backend: no device memory left for the KV cache within --gpu-memory-utilization " +
                std::to_string(options_.gpu_memory_utilization) + " (" + std::to_string(free_bytes >> 20) +
                " MiB free of " + std::to_string(total_bytes >> 20) + " MiB)");
  }
  return blocks;
}

void CudaBackend::allocate_kv(int32_t n_blocks, KvDType dtype) {
  if (n_blocks < 1) throw Error("cuda backend: the KV cache needs at least one block");
  kv_type_ = kv_type_of(dtype);
  const ModelConfig& c = cfg();
  kv_layer_bytes_ = static_cast<size_t>(n_blocks) * c.num_key_value_heads * kKvBlockSize * kv_row_bytes(c, dtype);
  drop_graphs();
  kv_ = DeviceBuffer();
  kv_blocks_ = 0;
  kv_ = DeviceBuffer(2 * kv_layer_bytes_ * c.num_hidden_layers, "cudaMalloc(KV cache)");
  kv_blocks_ = n_blocks;
}

void CudaBackend::launch(const StepBatch& batch, const SamplingBatch& sampling, StepOutput& out) {
  error_ = nullptr;
  pending_sampling_ = &sampling;
  pending_out_ = &out;
  try {
    if (layers_.empty() || kv_blocks_ == 0) throw Error("cuda backend: prepare() and allocate_kv() must come before a step");
    if (static_cast<int32_t>(sampling.rows.size()) != batch.n_logits()) {
      throw Error("cuda backend: " + std::to_string(sampling.rows.size()) + " sampling rows for " +
                  std::to_string(batch.n_logits()) + " logits rows");
    }
    if (sampling.vocab_rows != cfg().vocab_size) {
      throw Error("cuda backend: sampling vocab_rows " + std::to_string(sampling.vocab_rows) + " != the model's " +
                  std::to_string(cfg().vocab_size));
    }
    cuda_plan::validate_step(batch, cuda_plan::StepLimits{cfg().vocab_size, limits_.max_batch_tokens,
                                                          limits_.max_context_tokens, limits_.max_seqs, kv_blocks_});
    forward(batch);
  } catch (...) {
    error_ = std::current_exception();
  }
}

void CudaBackend::forward(const StepBatch& batch) {
  const ModelConfig& c = cfg();
  const int32_t n_kv = static_cast<int32_t>(c.num_key_value_heads);
  int32_t bucket = -1;
  if (!options_.enforce_eager && cuda_plan::is_decode_step(batch) && batch.max_blocks_per_seq() <= graph_table_width_) {
    bucket = cuda_plan::bucket_for(buckets_, batch.n_seqs());
  }
  StepView v;
  if (bucket > 0) {
    ensure_logits_rows(bucket);
    v.layout = cuda_plan::pack_step(
        batch, cuda_plan::PackPadding{.tokens = bucket, .seqs = bucket, .table_width = graph_table_width_, .logits = bucket},
        packed_);
    v.n_tokens = v.n_logits = bucket;
    v.split = cuda_plan::plan_kv_splits(bucket, n_kv, static_cast<int32_t>(limits_.max_context_tokens),
                                        props_.multiProcessorCount, std::clamp(att_rows_ / bucket, 1, 16));
  } else {
    ensure_logits_rows(batch.n_logits());
    v.layout = cuda_plan::pack_step(batch, cuda_plan::PackPadding{}, packed_);
    v.n_tokens = batch.n_tokens();
    v.n_logits = batch.n_logits();
    int32_t max_ctx = 1;
    for (int32_t len : batch.seq_lens()) max_ctx = std::max(max_ctx, len);
    v.split = cuda_plan::plan_kv_splits(v.n_tokens, n_kv, max_ctx, props_.multiProcessorCount,
                                        std::clamp(att_rows_ / v.n_tokens, 1, 16));
  }
  const size_t bytes = packed_.size() * sizeof(int32_t);
  DeviceBuffer* target = &graph_ints_;
  if (bucket <= 0) {
    if (step_ints_.bytes() < bytes) step_ints_ = DeviceBuffer(std::max(bytes, step_ints_.bytes() * 2), "cudaMalloc(step)");
    target = &step_ints_;
  }
  // The pinned copy may still feed the previous step's upload: wait for the stream first.
  check(cudaStreamSynchronize(stream_), "synchronize before packing a step");
  pinned_ints_.reserve(bytes);
  std::memcpy(pinned_ints_.as<void>(), packed_.data(), bytes);
  check(cudaMemcpyAsync(target->as<void>(), pinned_ints_.as<void>(), bytes, cudaMemcpyHostToDevice, stream_),
        "upload step");
  v.ints = target->as<int32_t>();

  if (bucket <= 0) {
    enqueue_model(v);
    return;
  }
  const auto it = graphs_.find(bucket);
  if (it != graphs_.end()) {
    check(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
    return;
  }
  // First step of this bucket: run it eagerly (loads the kernels, picks the GEMM algorithms), then
  // capture the same launches for the next steps.
  enqueue_model(v);
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    enqueue_model(v);
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(status, "cudaGraphInstantiate");
  graphs_.emplace(bucket, exec);
}

void CudaBackend::enqueue_model(const StepView& v) {
  const ModelConfig& c = cfg();
  const int32_t* token_ids = v.ints + v.layout.token_ids;
  const int32_t* positions = v.ints + v.layout.positions;
  const int32_t* slots = v.ints + v.layout.slot_mapping;
  const int32_t* token_seq = v.ints + v.layout.token_seq;
  const int32_t* ctx_lens = v.ints + v.layout.context_lens;
  const int32_t* tables = v.ints + v.layout.block_tables;
  const int32_t* logits_idx = v.ints + v.layout.logits_indices;

  const int32_t n = v.n_tokens;
  const int32_t hidden = static_cast<int32_t>(c.hidden_size), inter = static_cast<int32_t>(c.intermediate_size);
  const int32_t n_heads = static_cast<int32_t>(c.num_attention_heads);
  const int32_t n_kv = static_cast<int32_t>(c.num_key_value_heads), hd = static_cast<int32_t>(c.head_dim);
  const int32_t qkv_w = static_cast<int32_t>(c.q_dim() + 2 * c.kv_dim());
  const auto eps = static_cast<float>(c.rms_norm_eps);
  const cuda::AttentionScratch scratch{att_m_.as<float>(), att_l_.as<float>(), att_acc_.as<float>()};

  cuda::embed_gather(embed_.as<uint16_t>(), token_ids, n, hidden, x_.as<float>(), stream_);
  for (size_t li = 0; li < layers_.size(); ++li) {
    const DeviceLayer& L = layers_[li];
    auto* k_cache = kv_.as<uint8_t>() + 2 * li * kv_layer_bytes_;
    auto* v_cache = k_cache + kv_layer_bytes_;
    cuda::rms_norm(x_.as<float>(), nullptr, L.attn_norm.as<float>(), n, hidden, eps, h_.as<uint16_t>(), stream_);
    gemm_->run(L.qkv.as<uint16_t>(), h_.as<uint16_t>(), qkv_.as<float>(), qkv_w, hidden, n, false, stream_);
    cuda::qk_norm_rope_kv_write(qkv_.as<float>(), L.qkv_bias.as<float>(), L.q_norm.as<float>(), L.k_norm.as<float>(),
                                positions, slots, n, n_heads, n_kv, hd, static_cast<float>(c.rope_theta), eps,
                                q_.as<uint16_t>(), k_cache, v_cache, kv_type_, stream_);
    cuda::paged_attention(q_.as<uint16_t>(), k_cache, v_cache, kv_type_, token_seq, ctx_lens, tables,
                          v.layout.table_width, n, n_heads, n_kv, hd, v.split.n_splits, v.split.blocks_per_split,
                          scratch, attn_.as<uint16_t>(), stream_);
    gemm_->run(L.o.as<uint16_t>(), attn_.as<uint16_t>(), x_.as<float>(), hidden, c.q_dim(), n, true, stream_);
    cuda::rms_norm(x_.as<float>(), nullptr, L.ffn_norm.as<float>(), n, hidden, eps, h_.as<uint16_t>(), stream_);
    gemm_->run(L.gate_up.as<uint16_t>(), h_.as<uint16_t>(), gate_up_.as<float>(), 2 * inter, hidden, n, false, stream_);
    cuda::silu_mul(gate_up_.as<float>(), n, inter, act_.as<uint16_t>(), stream_);
    gemm_->run(L.down.as<uint16_t>(), act_.as<uint16_t>(), x_.as<float>(), hidden, inter, n, true, stream_);
  }
  cuda::rms_norm(x_.as<float>(), logits_idx, final_norm_.as<float>(), v.n_logits, hidden, eps,
                 logits_h_.as<uint16_t>(), stream_);
  gemm_->run(lm_head_ptr_, logits_h_.as<uint16_t>(), logits_.as<float>(), c.vocab_size, hidden, v.n_logits, false,
             stream_);
  cuda::check_launch("forward kernels");
}

void CudaBackend::wait() {
  const SamplingBatch* sampling = std::exchange(pending_sampling_, nullptr);
  StepOutput* out = std::exchange(pending_out_, nullptr);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  if (sampling == nullptr || out == nullptr) throw Error("cuda backend: wait() without launch()");
  sample(*sampling, *out);
}

void CudaBackend::sample(const SamplingBatch& sampling, StepOutput& out) {
  const auto n_rows = static_cast<int32_t>(sampling.rows.size());
  const int32_t vocab = sampling.vocab_rows;
  const size_t words = sampling.mask_words();
  const size_t n_mask_rows = sampling.allowed_mask.size() / std::max<size_t>(1, words);
  if (sampling.bias_ids.size() != sampling.bias_values.size()) throw Error("sampling: bias ids and values differ in size");
  if (sampling.history.size() > static_cast<size_t>(INT32_MAX) || sampling.bias_ids.size() > static_cast<size_t>(INT32_MAX)) {
    throw Error("sampling: token history too large");
  }
  // Host checks (the CPU backend's rules): parameters, ranges, mask rows.
  std::vector<cuda::DeviceSamplingRow> rows(static_cast<size_t>(n_rows));
  bool any_penalty = false;
  for (int32_t r = 0; r < n_rows; ++r) {
    const SamplingRow& s = sampling.rows[r];
    SamplingParams p;
    p.temperature = s.temperature;
    p.top_k = s.top_k;
    p.top_p = s.top_p;
    p.min_p = s.min_p;
    p.repetition_penalty = s.repetition_penalty;
    p.presence_penalty = s.presence_penalty;
    p.frequency_penalty = s.frequency_penalty;
    if (s.bias_begin < 0 || s.bias_len < 0 || s.bias_begin + s.bias_len > static_cast<int64_t>(sampling.bias_ids.size())) {
      throw Error("sampling: logit bias range outside SamplingBatch::bias_ids");
    }
    for (int64_t i = s.bias_begin; i < s.bias_begin + s.bias_len; ++i) {
      p.logit_bias.emplace_back(sampling.bias_ids[i], sampling.bias_values[i]);
    }
    validate(p, vocab);
    const bool penalty = s.repetition_penalty != 1.0f || s.presence_penalty != 0.0f || s.frequency_penalty != 0.0f;
    any_penalty = any_penalty || penalty;
    const int64_t hist = static_cast<int64_t>(sampling.history.size());
    for (auto [begin, len] : {std::pair{s.prompt_begin, s.prompt_len}, std::pair{s.output_begin, s.output_len}}) {
      if (penalty && len > 0 && (begin < 0 || begin + len > hist)) {
        throw Error("sampling: token history range outside SamplingBatch::history");
      }
    }
    if (penalty) {
      for (int64_t i = 0; i < s.prompt_len; ++i) {
        const int32_t id = sampling.history[s.prompt_begin + i];
        if (id < 0 || id >= vocab) throw Error("sampling: history token id " + std::to_string(id) + " outside the vocabulary");
      }
      for (int64_t i = 0; i < s.output_len; ++i) {
        const int32_t id = sampling.history[s.output_begin + i];
        if (id < 0 || id >= vocab) throw Error("sampling: history token id " + std::to_string(id) + " outside the vocabulary");
      }
    }
    if (s.mask_row >= 0 && static_cast<size_t>(s.mask_row) >= n_mask_rows) throw Error("sampling: mask row out of range");
    cuda::DeviceSamplingRow& d = rows[r];
    d.temperature = s.temperature;
    d.top_p = s.top_p;
    d.min_p = s.min_p;
    d.repetition_penalty = s.repetition_penalty;
    d.presence_penalty = s.presence_penalty;
    d.frequency_penalty = s.frequency_penalty;
    d.top_k = s.top_k;
    d.mask_row = s.mask_row;
    d.seed = s.seed;
    d.draws = s.draws;
    d.prompt_begin = penalty ? static_cast<int32_t>(s.prompt_begin) : 0;
    d.prompt_len = penalty ? static_cast<int32_t>(s.prompt_len) : 0;
    d.output_begin = penalty ? static_cast<int32_t>(s.output_begin) : 0;
    d.output_len = penalty ? static_cast<int32_t>(s.output_len) : 0;
    d.bias_begin = static_cast<int32_t>(s.bias_begin);
    d.bias_len = static_cast<int32_t>(s.bias_len);
  }

  // One pinned staging area: rows | masks | history | bias ids | bias values (each 16-byte aligned).
  auto align = [](size_t v) { return (v + 15) / 16 * 16; };
  const size_t rows_bytes = align(rows.size() * sizeof(cuda::DeviceSamplingRow));
  const size_t mask_bytes = align(sampling.allowed_mask.size() * sizeof(uint32_t));
  const size_t hist_bytes = align(sampling.history.size() * sizeof(int32_t));
  const size_t bias_id_bytes = align(sampling.bias_ids.size() * sizeof(int32_t));
  const size_t bias_value_bytes = align(sampling.bias_values.size() * sizeof(float));
  const size_t total = rows_bytes + mask_bytes + hist_bytes + bias_id_bytes + bias_value_bytes;
  pinned_sampling_.reserve(std::max<size_t>(total, 16));
  auto* base = pinned_sampling_.as<uint8_t>();
  std::memcpy(base, rows.data(), rows.size() * sizeof(cuda::DeviceSamplingRow));
  if (!sampling.allowed_mask.empty()) std::memcpy(base + rows_bytes, sampling.allowed_mask.data(), sampling.allowed_mask.size() * 4);
  if (!sampling.history.empty()) std::memcpy(base + rows_bytes + mask_bytes, sampling.history.data(), sampling.history.size() * 4);
  if (!sampling.bias_ids.empty()) {
    std::memcpy(base + rows_bytes + mask_bytes + hist_bytes, sampling.bias_ids.data(), sampling.bias_ids.size() * 4);
    std::memcpy(base + rows_bytes + mask_bytes + hist_bytes + bias_id_bytes, sampling.bias_values.data(),
                sampling.bias_values.size() * 4);
  }
  if (sampling_misc_.bytes() < total) sampling_misc_ = DeviceBuffer(std::max(total, sampling_misc_.bytes() * 2), "cudaMalloc(sampling)");
  check(cudaMemcpyAsync(sampling_misc_.as<void>(), base, total, cudaMemcpyHostToDevice, stream_), "upload sampling rows");
  auto* dev = sampling_misc_.as<uint8_t>();

  cuda::SamplingBuffers b;
  b.raw = logits_.as<float>();
  b.processed = processed_.as<float>();
  b.counts = counts_.as<int32_t>();
  b.rows = reinterpret_cast<const cuda::DeviceSamplingRow*>(dev);
  b.masks = reinterpret_cast<const uint32_t*>(dev + rows_bytes);
  b.history = reinterpret_cast<const int32_t*>(dev + rows_bytes + mask_bytes);
  b.bias_ids = reinterpret_cast<const int32_t*>(dev + rows_bytes + mask_bytes + hist_bytes);
  b.bias_values = reinterpret_cast<const float*>(dev + rows_bytes + mask_bytes + hist_bytes + bias_id_bytes);
  b.sampled = sampled_.as<int32_t>();
  b.sampled_logprob = sampled_logprob_.as<float>();
  cuda::sample_rows(b, n_rows, vocab, any_penalty, stream_);
  cuda::check_launch("sampling kernels");

  // Results: ids and logprobs, plus the raw rows that want logits or top logprobs.
  std::vector<int32_t> host_rows;  // rows whose raw logits come back
  for (int32_t r = 0; r < n_rows; ++r) {
    if (sampling.rows[r].want_logits || sampling.rows[r].n_logprobs > 0) host_rows.push_back(r);
  }
  const size_t v = static_cast<size_t>(vocab);
  pinned_out_.reserve(static_cast<size_t>(n_rows) * 8 + host_rows.size() * v * sizeof(float) + 16);
  auto* ids = pinned_out_.as<int32_t>();
  auto* lps = reinterpret_cast<float*>(ids + n_rows);
  auto* raw_rows = lps + n_rows;
  check(cudaMemcpyAsync(ids, sampled_.as<void>(), n_rows * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_), "download ids");
  check(cudaMemcpyAsync(lps, sampled_logprob_.as<void>(), n_rows * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        "download logprobs");
  for (size_t i = 0; i < host_rows.size(); ++i) {
    check(cudaMemcpyAsync(raw_rows + i * v, logits_.as<float>() + static_cast<size_t>(host_rows[i]) * v, v * sizeof(float),
                          cudaMemcpyDeviceToHost, stream_),
          "download logits row");
  }
  check(cudaStreamSynchronize(stream_), "step");

  out.clear();
  out.sampled.assign(ids, ids + n_rows);
  out.sampled_logprob.assign(static_cast<size_t>(n_rows), 0.0f);
  out.top_begin.assign(static_cast<size_t>(n_rows), 0);
  out.top_len.assign(static_cast<size_t>(n_rows), 0);
  out.logits_row.assign(static_cast<size_t>(n_rows), -1);
  std::vector<float> logprobs;
  int32_t next_logits_row = 0;
  for (size_t i = 0, r = 0; r < static_cast<size_t>(n_rows); ++r) {
    const SamplingRow& row = sampling.rows[r];
    if (out.sampled[r] < 0) throw Error("sampling: logits are NaN or infinite, or every token is masked");
    if (row.n_logprobs >= 0) out.sampled_logprob[r] = lps[r];
    if (i < host_rows.size() && host_rows[i] == static_cast<int32_t>(r)) {
      const std::span<const float> raw(raw_rows + i * v, v);
      ++i;
      if (row.want_logits) {
        out.logits.insert(out.logits.end(), raw.begin(), raw.end());
        out.logits_row[r] = next_logits_row++;
      }
      if (row.n_logprobs > 0) {
        logprobs.resize(v);
        log_softmax(raw, logprobs);
        out.sampled_logprob[r] = logprobs[static_cast<size_t>(out.sampled[r])];
        // The k most likely tokens, best first, ties lower id first.
        std::vector<int32_t> order(v);
        for (size_t id = 0; id < v; ++id) order[id] = static_cast<int32_t>(id);
        const auto k = static_cast<size_t>(std::min<int64_t>(row.n_logprobs, vocab));
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                          [&](int32_t a, int32_t b) { return logprobs[a] > logprobs[b] || (logprobs[a] == logprobs[b] && a < b); });
        out.top_begin[r] = static_cast<int32_t>(out.top.size());
        for (size_t j = 0; j < k; ++j) out.top.push_back({order[j], logprobs[order[j]]});
        out.top_len[r] = static_cast<int32_t>(k);
      }
    } else if (row.n_logprobs == 0) {
      out.top_begin[r] = static_cast<int32_t>(out.top.size());
    }
  }
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a failed query
    return 0;
  }
  return n;
}

std::string cuda_device_summary() {
  const int n = cuda_device_count();
  if (n == 0) return "no CUDA device";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "no CUDA device (properties query failed)";
  int driver = 0;
  cudaDriverGetVersion(&driver);
  char line[768];
  std::snprintf(line, sizeof line, "%s, %.1f GiB, sm_%d%d, %d SMs, driver %d.%d", p.name,
                static_cast<double>(p.totalGlobalMem) / (1u << 30), p.major, p.minor, p.multiProcessorCount,
                driver / 1000, (driver % 1000) / 10);
  return line;
}

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
  if (cuda_device_count() == 0) throw Error("--device cuda: no CUDA device found (" + cuda_device_summary() + ")");
  if (!(options.gpu_memory_utilization > 0.0 && options.gpu_memory_utilization <= 1.0)) {
    throw Error("--gpu-memory-utilization must be in (0, 1], got " + std::to_string(options.gpu_memory_utilization));
  }
  return std::make_unique<CudaBackend>(options);
}

}  // namespace qs
