// The Anthropic Messages API (POST /v1/messages) as a translation onto the chat pipeline: the
// request becomes a /v1/chat/completions body, the chat.completion (or its chunk stream) becomes
// a `message` object (or the Messages event stream), and errors take Anthropic's shape.
//
// Field names, stop reasons and the event sequence: Anthropic API reference, "Messages" and
// "Streaming Messages".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace qs {

struct AnthropicRequest {
  nlohmann::ordered_json chat_body;         // a /v1/chat/completions body
  std::vector<std::string> stop_sequences;  // to report which one stopped the generation
  bool stream = false;
  std::vector<std::string> message_params;  // per chat message: the field it came from ("system", "messages[2]")
};

/// Translates a Messages request body: `max_tokens` (required, integer >= 1), `system` (string or
/// text blocks), `messages` (user / assistant; content a string or blocks: text, tool_use {id,
/// name, input} in assistant turns, tool_result {tool_use_id, content} in user turns; thinking
/// blocks are dropped), `stop_sequences`, `temperature` (0..1), `top_p`, `top_k`, `tools`
/// ({name, description, input_schema}), `tool_choice` ({type: auto | any | tool + name | none}),
/// `stream`. Unknown fields (metadata, thinking, cache_control, ...) are ignored. Throws
/// ApiError(400, param = the Messages field) on a missing required field, a wrong type or value,
/// image / document blocks and server tools.
AnthropicRequest translate_anthropic_request(const nlohmann::ordered_json& body);

/// Anthropic's stop_reason for a chat finish_reason and the engine's stop_cause: tool_calls ->
/// tool_use, length -> max_tokens, stop_string -> stop_sequence, else end_turn.
std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_cause);

/// The `message` object for a chat.completion body (choice 0): content blocks (text when there
/// is text or no tool call, then one tool_use block per call with `input` the parsed arguments),
/// stop_reason, stop_sequence (the matching stop sequence when exactly one was given, else
/// null), usage {input_tokens (the prompt tokens not read from the prefix cache), output_tokens,
/// cache_creation_input_tokens 0, cache_read_input_tokens}: Anthropic's split, whose sum is the
/// whole input (what count_tokens answers).
nlohmann::json anthropic_body(const nlohmann::json& chat_completion, const std::vector<std::string>& stop_sequences);

/// The Messages id of the chat completion `chat_id`: "chatcmpl-XXXX" -> "msg_XXXX".
std::string message_id(const std::string& chat_id);

/// True for the paths answered in Anthropic's shape: /v1/messages and everything under
/// /v1/messages/ (count_tokens, and the 404 / 405 of an unknown path there).
inline bool is_anthropic_path(const std::string& path) {
  return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0;
}

/// Anthropic's error body {"type": "error", "error": {"type", "message"}}; the type follows the
/// status: 400 invalid_request_error, 401 authentication_error, 403 permission_error, 404
/// not_found_error, 413 request_too_large, 429 rate_limit_error, 503 / 529 overloaded_error, 504
/// / 408 timeout_error, else api_error.
nlohmann::json anthropic_error_json(const ApiError& error);

/// Turns the chat.completion.chunk SSE stream of one request into the Messages event stream
/// ("event: <type>\ndata: {...}\n\n"): message_start, ping, per content block
/// content_block_start, content_block_delta (text_delta / input_json_delta)...,
/// content_block_stop, then message_delta (stop_reason, stop_sequence, usage: output_tokens and the
/// final input split as in anthropic_body; message_start had the whole prompt as input_tokens) and
/// message_stop. Keep-alive comments become `ping` events; a chat error event becomes an `error`
/// event that ends the stream.
class AnthropicStreamTranslator {
 public:
  AnthropicStreamTranslator(std::string id, std::string model, int64_t input_tokens,
                            std::vector<std::string> stop_sequences);
  std::string translate(const std::string& chat_sse);

 private:
  std::string on_chunk(const nlohmann::json& chunk);
  std::string close_block();

  std::string id_, model_;
  int64_t input_tokens_;
  std::vector<std::string> stop_sequences_;
  bool started_ = false, finished_ = false;
  int64_t index_ = -1;      // the open block's index, -1 when none is open
  int64_t n_blocks_ = 0;
  std::string block_type_;  // "text" or "tool_use"
  std::string finish_reason_, stop_cause_;
  int64_t output_tokens_ = 0;
  int64_t cached_tokens_ = 0;  // prompt tokens read from the prefix cache (the usage chunk's)
};

}  // namespace qs
