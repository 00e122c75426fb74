// The OpenAI Responses API (POST /v1/responses) as a translation onto the chat pipeline: the
// request becomes a /v1/chat/completions body, the chat.completion (or its chunk stream) becomes a
// `response` object (or the Responses event stream). Stateless: nothing is stored
// (`store: false` semantics), so `previous_response_id` is a 400.
//
// Field names and event sequence: OpenAI API reference, "Responses" and "Streaming events".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qs {

struct ResponsesRequest {
  nlohmann::ordered_json chat_body;  // a /v1/chat/completions body (parse_chat_request validates it further)
  nlohmann::json echo;               // request fields the response object repeats (instructions, tools, ...)
  bool stream = false;
  std::vector<std::string> message_params;  // per chat message: the field it came from ("instructions", "input[3]")
};

/// Translates a Responses request body. `input`: a string (one user message) or an array of
/// items: messages {role: user|assistant|system|developer, content: string or input_text /
/// output_text parts}, `function_call` {call_id, name, arguments} and `function_call_output`
/// {call_id, output}; `instructions` becomes a leading system message; `max_output_tokens` ->
/// max_tokens; function tools {type: "function", name, description, parameters} -> chat tools;
/// `tool_choice` auto | none | required | {type: "function", name}; `text.format` text |
/// json_object | json_schema {name, schema, strict} -> response_format. Unknown fields are
/// ignored. Throws ApiError(400, invalid_request_error, param = the Responses field) on a wrong
/// type or value, on `previous_response_id`, and on non-function tools or unsupported items.
ResponsesRequest translate_responses_request(const nlohmann::ordered_json& body);

/// The Responses id of the chat completion `chat_id`: "chatcmpl-XXXX" -> "resp_XXXX" (every
/// item id of the response shares the suffix).
std::string response_id(const std::string& chat_id);

/// The `response` object for a chat.completion body (choice 0, with its stop_cause): output items
/// (a `message` with one output_text part when there is text or no tool call, then one
/// `function_call` item per tool call), status completed, or incomplete with
/// incomplete_details.reason "max_output_tokens" when the generation hit max_tokens; usage
/// {input_tokens, input_tokens_details.cached_tokens, output_tokens,
/// output_tokens_details.reasoning_tokens, total_tokens}; the `echo` fields merged in.
nlohmann::json responses_body(const nlohmann::json& chat_completion, const nlohmann::json& echo);

/// Turns the chat.completion.chunk SSE stream of one request into the Responses event stream
/// ("event: <type>\ndata: {..., "type", "sequence_number"}\n\n"): response.created,
/// response.in_progress, then per output item response.output_item.added,
/// (message) response.content_part.added, response.output_text.delta..., response.output_text.done,
/// response.content_part.done, (function call) response.function_call_arguments.delta...,
/// response.function_call_arguments.done, then response.output_item.done; finally
/// response.completed (or response.incomplete). A chat error event (a timeout, an engine error)
/// first closes the open item as "incomplete" with what was streamed of it, then becomes `error`,
/// then response.failed (its output keeps that item, its usage the tokens generated). Keep-alive
/// comments pass through.
class ResponsesStreamTranslator {
 public:
  ResponsesStreamTranslator(std::string id, std::string model, int64_t created_at, nlohmann::json echo);
  std::string translate(const std::string& chat_sse);

 private:
  std::string event(nlohmann::json payload);
  nlohmann::json response_object(const std::string& status) const;
  std::string on_chunk(const nlohmann::json& chunk);
  std::string open_message();
  /// Ends the open item with `status` ("completed"; "incomplete" for the item a reply cut at
  /// max_output_tokens ended in); empty when no item is open.
  std::string close_item(const char* status = "completed");
  std::string finish();

  std::string id_, model_;
  int64_t created_at_;
  nlohmann::json echo_;
  int64_t sequence_ = 0;
  bool started_ = false, finished_ = false, failed_ = false;
  nlohmann::json output_ = nlohmann::json::array();  // finished items
  nlohmann::json current_;                           // the open item, or null
  std::string current_text_;                         // its text / arguments so far
  std::string finish_reason_;
  nlohmann::json usage_;
  nlohmann::json error_;
};

/// The Responses usage object for a chat usage object.
nlohmann::json responses_usage(const nlohmann::json& chat_usage);

}  // namespace qs
