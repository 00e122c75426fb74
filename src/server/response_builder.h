// OpenAI response shapes: chat.completion / text_completion bodies and the SSE chunks of a
// streamed response (chat.completion.chunk / text_completion). Field names follow the OpenAI API
// reference; `reasoning_content` follows vLLM / DeepSeek for <think> output.
#pragma once

#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/generation_job.h"
#include "tokenizer/tokenizer.h"

namespace qs {

namespace chat {
class ReasoningStreamSplitter;
class ToolCallStreamParser;
}

/// Accumulated output of one choice.
struct ChoiceState {
  std::shared_ptr<RequestStream> stream;
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double queue_ms = 0;
  bool admitted = false;                 // the engine started it (queue_ms is known)
  int64_t cached_tokens = 0;             // prompt tokens served from the prefix cache
  int64_t prefill_computed_tokens = 0;   // prompt tokens actually computed
  int64_t preemptions = 0;
  int64_t spec_draft_tokens = 0;         // speculative decoding: drafts verified / accepted
  int64_t spec_accepted_tokens = 0;
  std::string stop_cause;                // why it ended (engine's stop_cause)
  EngineErrorCode error_code = EngineErrorCode::kNone;
  std::deque<EngineEvent> pending;       // events read before the response started, to replay
  bool done = false;

  void apply(const EngineEvent& event);
};

/// Non-streaming response body for all choices.
nlohmann::json build_response(const GenerationJob& job, const std::vector<ChoiceState>& choices,
                              const Tokenizer& tokenizer);

/// `usage` object: prompt_tokens, completion_tokens (summed over choices), total_tokens and
/// prompt_tokens_details.cached_tokens (prompt tokens served from the prefix cache, choice 0).
nlohmann::json usage_json(const GenerationJob& job, const std::vector<ChoiceState>& choices);

/// Turns engine events into SSE bytes ("data: {...}\n\n").
class StreamEncoder {
 public:
  StreamEncoder(const GenerationJob& job, const Tokenizer& tokenizer, size_t n_choices);
  ~StreamEncoder();

  /// First chunk of every choice: delta {"role": "assistant", "content": ""} (chat only).
  std::string role_chunks();
  /// Chunks for one event of choice `index` (content / reasoning deltas, tool-call deltas as
  /// OpenAI sends them: {index, id, type, function: {name, arguments: ""}} first, then
  /// {index, function: {arguments: fragment}}; logprobs, and the finish chunk when the choice
  /// ends, finish_reason "tool_calls" when it made a call). Empty when there is nothing to send.
  std::string event_chunks(size_t index, const EngineEvent& event, const ChoiceState& state);
  /// Usage chunk (when requested) and "data: [DONE]". With `timings` (stream_options.
  /// include_timings) the last chunk before [DONE] carries it as "timings": the usage chunk, or
  /// else a chunk with no choices.
  std::string final_chunks(const std::vector<ChoiceState>& choices, const nlohmann::json* timings = nullptr);

 private:
  nlohmann::json chunk(nlohmann::json choice) const;
  const GenerationJob& job_;
  const Tokenizer& tokenizer_;
  std::vector<std::unique_ptr<chat::ReasoningStreamSplitter>> splitters_;
  // Per choice with tools: <tool_call> blocks -> OpenAI tool_calls deltas as they are generated.
  std::vector<std::unique_ptr<chat::ToolCallStreamParser>> tool_parsers_;
  // Per choice (completions with logprobs): characters of the tokens streamed so far, where the
  // next chunk's text_offset starts.
  std::vector<size_t> text_offsets_;
};

/// "data: <json>\n\n".
std::string sse_data(const nlohmann::json& payload);

}  // namespace qs
