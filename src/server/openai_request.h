// Parsing and validation of OpenAI chat-completion and completion request bodies.
//
// Field names and semantics: OpenAI API reference (Chat Completions, Completions), plus the
// vLLM extensions top_k, min_p, repetition_penalty, chat_template_kwargs, add_generation_prompt and
// continue_final_message. Unknown fields are ignored; a wrong type or an out-of-range value throws
// ApiError(400) naming the field in `param`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampling_params.h"
#include "server/structured_output.h"

namespace qs {

/// Fields shared by /v1/chat/completions and /v1/completions.
struct GenerationFields {
  std::string model;
  std::optional<int32_t> max_tokens;  // max_tokens or max_completion_tokens
  SamplingParams sampling;            // temperature, top_p, top_k, min_p, penalties, seed, bias
  std::vector<std::string> stop;      // "stop": string or list of strings
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool logprobs = false;
  int32_t top_logprobs = 0;           // 0..20
  bool echo = false;                  // completions only
  std::optional<double> timeout_s;    // "timeout": seconds until the generation is ended (> 0)
  bool include_timings = false;       // stream_options.include_timings: "timings" on the last SSE chunk
  int32_t priority = 0;               // vLLM's "priority": lower is scheduled sooner, ties FIFO
  std::optional<double> slo_ttft_ms;  // "slo_ttft_ms": this request's TTFT SLO (> 0), else --slo-ttft-ms
  // vLLM's sampling extensions. ignore_eos: the model's end-of-sequence tokens (<|im_end|>,
  // <|endoftext|>) do not stop the output, and the output guard is off: exactly max_tokens tokens
  // unless a stop string, a stop_token_ids token or a grammar ends it. min_tokens (<= max_tokens):
  // no stop token nor stop string ends the output before it has this many tokens.
  // stop_token_ids: more token ids that end the output (not returned as text), ids in [0, vocab).
  bool ignore_eos = false;
  int32_t min_tokens = 0;
  std::vector<int32_t> stop_token_ids;
  // The grammar source the output must follow (server/structured_output.h): response_format,
  // structured_outputs, guided_*, json_schema / grammar, or (chat) a forced tool_choice. Other
  // APIs (/v1/responses text.format, /v1/messages tool_choice) set it the same way; the job
  // builder compiles it (400 on errors) before the request is queued.
  std::optional<StructuredOutput> structured;
};

struct ChatRequest {
  GenerationFields fields;
  nlohmann::ordered_json messages;            // validated array of messages, content normalized
  nlohmann::ordered_json tools;       // null or array
  nlohmann::ordered_json tool_choice; // null, string or object
  bool parallel_tool_calls = true;    // with tool_choice required: one or more calls (false: one)
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;    // vLLM / Hugging Face: end the prompt with the assistant's turn opener
  bool continue_final_message = false;  // vLLM / Hugging Face: leave the final message open and continue it
};

struct CompletionRequest {
  GenerationFields fields;
  std::optional<std::string> prompt_text;   // prompt as a string
  std::vector<int32_t> prompt_ids;          // prompt as token ids (when given so)
};

/// Objects and arrays a request body may nest (a tool's JSON schema needs a few dozen levels).
/// Deeper bodies are refused while parsing: copying, printing or templating a JSON value recurses
/// once per level, and a few hundred thousand levels fit in a body of 1 MB.
inline constexpr int kMaxJsonDepth = 128;

/// Parses a request body, keeping members in document order (a duplicated key: first position,
/// last value), in time linear in its size (io/ordered_json_parser.h). Throws ApiError(400, code
/// "invalid_json") for malformed JSON, and for nesting deeper than kMaxJsonDepth (code
/// "json_too_deep"), before building the deep value.
nlohmann::ordered_json parse_json_limited(std::string_view body);

/// Throws ApiError(400) on invalid input. `vocab_size` bounds logit_bias ids and prompt ids.
/// add_generation_prompt and continue_final_message both true is a 400 (param
/// "continue_final_message"), as in vLLM and Hugging Face's apply_chat_template.
ChatRequest parse_chat_request(const nlohmann::ordered_json& body, int32_t vocab_size);
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body, int32_t vocab_size);

}  // namespace qs
