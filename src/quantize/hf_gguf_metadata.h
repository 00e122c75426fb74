// GGUF metadata and tensor names for a model read from a Hugging Face directory, so that
// `qwenserve quantize HF_DIR OUT.gguf` writes the keys llama.cpp's convert_hf_to_gguf.py writes
// for Qwen2/Qwen3 (and tools/testmodel writes for its GGUF output):
//
//   general.architecture ("qwen3" | "qwen2"), general.type "model", general.name (directory name),
//   {arch}.block_count, .context_length, .embedding_length, .feed_forward_length,
//   .attention.head_count, .attention.head_count_kv, .rope.freq_base (f32),
//   .attention.layer_norm_rms_epsilon (f32), .attention.key_length, .attention.value_length,
//   tokenizer.ggml.model "gpt2", .pre "qwen2", .tokens, .token_type (1 normal, 3 control,
//   4 user-defined, 5 unused "[PAD<id>]" filler), .merges ("left right"), .bos/.eos/.padding_token_id,
//   .add_bos_token / .add_eos_token (when tokenizer_config.json sets them), tokenizer.chat_template.
// general.file_type and general.quantization_version are the caller's (they depend on the mix).
#pragma once

#include <optional>
#include <string>

namespace qs {

class GgufWriter;
struct LoadedModel;

/// Adds the keys above for `model` (format kHuggingFace). Reads <dir>/tokenizer.json,
/// tokenizer_config.json and config.json (bos/eos fallback). Throws qs::Error naming the file on a
/// missing or malformed tokenizer.
void add_hf_gguf_metadata(GgufWriter& writer, const LoadedModel& model);

/// GGUF name of a Hugging Face Qwen2/Qwen3 tensor ("model.layers.3.mlp.down_proj.weight" ->
/// "blk.3.ffn_down.weight"), or std::nullopt for names outside the architecture.
std::optional<std::string> gguf_tensor_name(const std::string& hf_name);

/// Sort key giving llama.cpp converter order: token_embd, then per layer (attn_norm, attn_q(.bias),
/// attn_k(.bias), attn_v(.bias), attn_output, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate,
/// ffn_up, ffn_down), then output_norm, output.
long long gguf_tensor_order(const std::string& gguf_name);

}  // namespace qs
