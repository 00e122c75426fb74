// Which storage type each tensor gets when a model is quantized to a "mix" (`qwenserve quantize
// --type`, `--quantize`), following llama.cpp's llama_tensor_get_type policy in spirit.
//
// | mix    | matrices | bumped to Q6_K                                         | file_type |
// |--------|----------|--------------------------------------------------------|-----------|
// | f32    | F32      | -                                                      | 0         |
// | f16    | F16      | -                                                      | 1         |
// | bf16   | BF16     | -                                                      | 32        |
// | q8_0   | Q8_0     | -                                                      | 7         |
// | q4_0   | Q4_0     | output (*)                                             | 2         |
// | q4_k_m | Q4_K     | output (*), attn_v and ffn_down of "more bits" layers  | 15        |
// | q5_k_m | Q5_K     | output (*), attn_v and ffn_down of "more bits" layers  | 17        |
// | q6_k   | Q6_K     | (all Q6_K)                                             | 18        |
// (*) output.weight, or token_embd.weight when the embeddings are tied (it is also the output
// matrix then). An untied token_embd keeps the mix's matrix type. file_type is llama.cpp's
// `enum llama_ftype` (LLAMA_FTYPE_MOSTLY_*), stored as general.file_type.
// "More bits" layers (llama.cpp use_more_bits): i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2.
//
// 1-D tensors (norms, biases) are always F32. A matrix whose rows (innermost dim) are not a
// multiple of the chosen type's block falls back: Q4_K -> Q4_0 (same 4.5 bits per weight; ggml's
// Q5_0 is not supported here), Q5_K -> Q8_0, Q6_K -> Q8_0; and when rows are not a multiple of 32
// either, to F16 (BF16 for the bf16 mix, F32 for f32).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/dtype.h"

namespace qs {

enum class QuantMix { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K_M, kQ5_K_M, kQ6_K };

/// "q4_k_m" -> kQ4_K_M (names as in the table, lower case). std::nullopt for unknown names.
std::optional<QuantMix> parse_quant_mix(std::string_view name);
/// Every accepted name, for --help and error messages.
std::vector<std::string> quant_mix_names();
std::string_view quant_mix_name(QuantMix mix);
/// llama.cpp's llama_ftype value for general.file_type.
uint32_t quant_mix_file_type(QuantMix mix);
/// Upper-case name of a llama_ftype value of the table ("Q4_K_M"), or std::nullopt.
std::optional<std::string> file_type_name(uint32_t file_type);

/// Storage type of tensor `gguf_name` (GGUF naming: "blk.3.attn_v.weight", "output.weight") of
/// shape `shape` (outermost first) in a model of `n_layers` layers. `tied_embeddings`: the file has
/// no output.weight, token_embd.weight doubles as the output matrix.
DType tensor_type_for(QuantMix mix, const std::string& gguf_name, const std::vector<int64_t>& shape,
                      int64_t n_layers, bool tied_embeddings);

/// The fallback chain above for a row of `row_elements`: `wanted` if it fits, else the first
/// type that does. Always returns a type whose block divides row_elements.
DType fallback_type(DType wanted, int64_t row_elements, QuantMix mix);

}  // namespace qs
