// anthropic_body, anthropic_error_json and AnthropicStreamTranslator (anthropic_api.h).
#include <string>

#include "server/anthropic_api.h"

namespace qs {

std::string message_id(const std::string& chat_id) {
  const size_t dash = chat_id.find('-');
  return "msg_" + (dash == std::string::npos ? chat_id : chat_id.substr(dash + 1));
}

namespace {

using json = nlohmann::json;

json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, false);
  return input.is_object() ? input : json::object();
}

json stop_sequence_for(const std::string& stop_reason, const std::vector<std::string>& stops) {
  return stop_reason == "stop_sequence" && stops.size() == 1 ? json(stops.front()) : json(nullptr);
}

std::string sse_event(const json& payload) {
  return "event: " + payload["type"].get<std::string>() + "\ndata: " +
         payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace

std::string anthropic_stop_reason(const std::string& finish_reason, const std::string& stop_cause) {
  if (finish_reason == "tool_calls") return "tool_use";
  if (finish_reason == "length") return "max_tokens";
  if (stop_cause == "stop_string") return "stop_sequence";
  return "end_turn";
}

json anthropic_body(const json& chat, const std::vector<std::string>& stop_sequences) {
  const json& choice = chat.at("choices").at(0);
  const json& message = choice.at("message");
  json content = json::array();
  const std::string text = message.contains("content") && message["content"].is_string() ? message["content"].get<std::string>() : "";
  const bool has_calls = message.contains("tool_calls") && !message["tool_calls"].empty();
  if (!text.empty() || !has_calls) content.push_back({{"type", "text"}, {"text", text}});
  if (has_calls) {
    for (const auto& call : message["tool_calls"]) {
      content.push_back({{"type", "tool_use"}, {"id", call.at("id")}, {"name", call.at("function").at("name")},
                         {"input", tool_input(call.at("function").at("arguments").get<std::string>())}});
    }
  }
  const std::string stop_reason = anthropic_stop_reason(choice.value("finish_reason", ""), choice.value("stop_cause", ""));
  const json& usage = chat.value("usage", json::object());
  int64_t cached = 0;
  if (usage.contains("prompt_tokens_details")) cached = usage["prompt_tokens_details"].value("cached_tokens", 0);
  return {{"id", message_id(chat.at("id").get<std::string>())},
          {"type", "message"},
          {"role", "assistant"},
          {"model", chat.at("model")},
          {"content", content},
          {"stop_reason", stop_reason},
          {"stop_sequence", stop_sequence_for(stop_reason, stop_sequences)},
          // Anthropic's input_tokens leaves out the cache reads (the request's input is input_tokens +
          // cache_creation_input_tokens + cache_read_input_tokens); the prefix cache creates
          // nothing a client pays for.
          {"usage", {{"input_tokens", usage.value("prompt_tokens", int64_t{0}) - cached}, {"output_tokens", usage.value("completion_tokens", 0)},
                     {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", cached}}}};
}

json anthropic_error_json(const ApiError& error) {
  std::string type = "api_error";
  switch (error.status()) {
    case 400: case 405: case 411: case 415: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: case 529: type = "overloaded_error"; break;
    case 408: case 504: type = "timeout_error"; break;
    default: break;
  }
  return {{"type", "error"}, {"error", {{"type", type}, {"message", error.what()}}}};
}

AnthropicStreamTranslator::AnthropicStreamTranslator(std::string id, std::string model, int64_t input_tokens,
                                                     std::vector<std::string> stop_sequences)
    : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens), stop_sequences_(std::move(stop_sequences)) {}

std::string AnthropicStreamTranslator::close_block() {
  if (index_ < 0) return {};
  const std::string out = sse_event({{"type", "content_block_stop"}, {"index", index_}});
  index_ = -1;
  return out;
}

std::string AnthropicStreamTranslator::on_chunk(const json& chunk) {
  if (chunk.contains("error")) {
    finished_ = true;
    // Anthropic's error types for the chat error's type (anthropic_error_json does so by status).
    const std::string chat_type = chunk["error"].value("type", "");
    const std::string type = chat_type == "timeout"                 ? "timeout_error"
                             : chat_type == "service_unavailable"   ? "overloaded_error"
                             : chat_type == "invalid_request_error" ? "invalid_request_error"
                             : chat_type == "rate_limit_error"      ? "rate_limit_error"
                                                                    : "api_error";
    return sse_event({{"type", "error"}, {"error", {{"type", type}, {"message", chunk["error"].value("message", "")}}}});
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) {
    const json& usage = chunk["usage"];
    output_tokens_ = usage.value("completion_tokens", 0);
    input_tokens_ = usage.value("prompt_tokens", input_tokens_);
    if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object()) {
      cached_tokens_ = usage["prompt_tokens_details"].value("cached_tokens", int64_t{0});
    }
  }
  if (!chunk.contains("choices") || chunk["choices"].empty()) return {};
  const json& choice = chunk["choices"][0];
  const json& delta = choice.value("delta", json::object());
  std::string out;
  if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
    if (index_ >= 0 && block_type_ != "text") out += close_block();
    if (index_ < 0) {
      index_ = n_blocks_++;
      block_type_ = "text";
      out += sse_event({{"type", "content_block_start"}, {"index", index_}, {"content_block", {{"type", "text"}, {"text", ""}}}});
    }
    out += sse_event({{"type", "content_block_delta"}, {"index", index_}, {"delta", {{"type", "text_delta"}, {"text", delta["content"]}}}});
  }
  if (delta.contains("tool_calls") && delta["tool_calls"].is_array()) {
    for (const auto& call : delta["tool_calls"]) {
      const json& fn = call.value("function", json::object());
      if (call.contains("id") && call["id"].is_string()) {
        out += close_block();
        index_ = n_blocks_++;
        block_type_ = "tool_use";
        out += sse_event({{"type", "content_block_start"}, {"index", index_},
                          {"content_block", {{"type", "tool_use"}, {"id", call["id"]}, {"name", fn.value("name", "")}, {"input", json::object()}}}});
      }
      if (index_ >= 0 && block_type_ == "tool_use" && fn.contains("arguments") && fn["arguments"].is_string() &&
          !fn["arguments"].get<std::string>().empty()) {
        out += sse_event({{"type", "content_block_delta"}, {"index", index_},
                          {"delta", {{"type", "input_json_delta"}, {"partial_json", fn["arguments"]}}}});
      }
    }
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    finish_reason_ = choice["finish_reason"];
    stop_cause_ = choice.value("stop_cause", "");
  }
  return out;
}

std::string AnthropicStreamTranslator::translate(const std::string& chat_sse) {
  std::string out;
  if (!started_) {
    started_ = true;
    out += sse_event({{"type", "message_start"},
                      {"message", {{"id", message_id(id_)}, {"type", "message"}, {"role", "assistant"}, {"model", model_},
                                   {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                   {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0},
                                              {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 0}}}}}});
    out += sse_event({{"type", "ping"}});
  }
  size_t pos = 0;
  while (pos < chat_sse.size() && !finished_) {
    size_t end = chat_sse.find("\n\n", pos);
    if (end == std::string::npos) end = chat_sse.size();
    const std::string block = chat_sse.substr(pos, end - pos);
    pos = end + 2;
    if (block.rfind(":", 0) == 0) {
      out += sse_event({{"type", "ping"}});  // keep-alive
    } else if (block == "data: [DONE]") {
      finished_ = true;
      if (n_blocks_ == 0) {  // an empty reply is one empty text block
        out += sse_event({{"type", "content_block_start"}, {"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
        index_ = 0;
      }
      out += close_block();
      const std::string stop_reason = anthropic_stop_reason(finish_reason_, stop_cause_);
      out += sse_event({{"type", "message_delta"},
                        {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", stop_sequence_for(stop_reason, stop_sequences_)}}},
                        // The final split of the input (cache reads are known once the prompt ran),
                        // which the SDKs' message_delta handling copies into the message.
                        {"usage", {{"output_tokens", output_tokens_}, {"input_tokens", input_tokens_ - cached_tokens_},
                                   {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", cached_tokens_}}}});
      out += sse_event({{"type", "message_stop"}});
    } else if (block.rfind("data: ", 0) == 0) {
      out += on_chunk(json::parse(block.substr(6), nullptr, false));
    }
  }
  return out;
}

}  // namespace qs
