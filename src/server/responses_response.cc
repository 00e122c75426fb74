// responses_body and ResponsesStreamTranslator (responses_api.h): chat completion -> Responses.
#include <string>

#include "server/responses_api.h"

namespace qs {
namespace {

using json = nlohmann::json;

// "chatcmpl-XXXX" -> "<prefix>_XXXX": every item id of one response shares the request's suffix.
std::string id_with_prefix(const std::string& chat_id, const std::string& prefix, size_t n = 0) {
  const size_t dash = chat_id.find('-');
  std::string id = prefix + "_" + (dash == std::string::npos ? chat_id : chat_id.substr(dash + 1));
  return n == 0 ? id : id + "_" + std::to_string(n);
}

// status: "in_progress" (opened, no content yet), "completed", or "incomplete" (the reply was cut
// at max_output_tokens: OpenAI marks that last item incomplete and keeps its text).
json message_item(const std::string& id, const std::string& text, const char* status) {
  json content = json::array();
  if (std::string(status) != "in_progress") content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}});
  return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
}

json function_call_item(const std::string& id, const std::string& call_id, const std::string& name,
                        const std::string& arguments, const char* status) {
  return {{"type", "function_call"}, {"id", id}, {"call_id", call_id}, {"name", name},
          {"arguments", arguments}, {"status", status}};
}

json base_response(const std::string& id, const std::string& model, int64_t created_at, const json& echo,
                   const std::string& status) {
  json r = {{"id", id}, {"object", "response"}, {"created_at", created_at}, {"status", status},
            {"error", nullptr}, {"incomplete_details", nullptr}, {"model", model}, {"output", json::array()},
            {"usage", nullptr}};
  for (const auto& [key, value] : echo.items()) r[key] = value;
  return r;
}

}  // namespace

json responses_usage(const json& chat_usage) {
  if (!chat_usage.is_object()) return nullptr;
  const int64_t in = chat_usage.value("prompt_tokens", 0), out = chat_usage.value("completion_tokens", 0);
  int64_t cached = 0;
  if (chat_usage.contains("prompt_tokens_details")) cached = chat_usage["prompt_tokens_details"].value("cached_tokens", 0);
  return {{"input_tokens", in}, {"input_tokens_details", {{"cached_tokens", cached}}}, {"output_tokens", out},
          {"output_tokens_details", {{"reasoning_tokens", 0}}}, {"total_tokens", in + out}};
}

std::string response_id(const std::string& chat_id) { return id_with_prefix(chat_id, "resp"); }

json responses_body(const json& chat, const json& echo) {
  const json& choice = chat.at("choices").at(0);
  const json& message = choice.at("message");
  const std::string chat_id = chat.at("id").get<std::string>();
  const bool incomplete = choice.value("finish_reason", "") == "length";
  json r = base_response(response_id(chat_id), chat.at("model").get<std::string>(),
                         chat.value("created", int64_t{0}), echo, incomplete ? "incomplete" : "completed");
  if (incomplete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  const std::string text = message.contains("content") && message["content"].is_string() ? message["content"].get<std::string>() : "";
  const bool has_calls = message.contains("tool_calls") && !message["tool_calls"].empty();
  if (!text.empty() || !has_calls) {
    r["output"].push_back(message_item(id_with_prefix(chat_id, "msg"), text, incomplete && !has_calls ? "incomplete" : "completed"));
  }
  if (has_calls) {
    size_t n = 0;
    for (const auto& call : message["tool_calls"]) {
      r["output"].push_back(function_call_item(id_with_prefix(chat_id, "fc", ++n), call.at("id").get<std::string>(),
                                               call.at("function").at("name").get<std::string>(),
                                               call.at("function").at("arguments").get<std::string>(), "completed"));
    }
    if (incomplete) r["output"].back()["status"] = "incomplete";  // the call the cut ended in
  }
  r["usage"] = responses_usage(chat.value("usage", json()));
  return r;
}

ResponsesStreamTranslator::ResponsesStreamTranslator(std::string id, std::string model, int64_t created_at, json echo)
    : id_(std::move(id)), model_(std::move(model)), created_at_(created_at), echo_(std::move(echo)) {}

std::string ResponsesStreamTranslator::event(json payload) {
  payload["sequence_number"] = sequence_++;
  const std::string type = payload["type"].get<std::string>();
  return "event: " + type + "\ndata: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json ResponsesStreamTranslator::response_object(const std::string& status) const {
  json r = base_response(id_with_prefix(id_, "resp"), model_, created_at_, echo_, status);
  r["output"] = output_;
  return r;
}

std::string ResponsesStreamTranslator::open_message() {
  current_ = message_item(id_with_prefix(id_, "msg"), "", "in_progress");
  current_text_.clear();
  const int64_t index = static_cast<int64_t>(output_.size());
  std::string out = event({{"type", "response.output_item.added"}, {"output_index", index}, {"item", current_}});
  out += event({{"type", "response.content_part.added"}, {"item_id", current_["id"]}, {"output_index", index},
                {"content_index", 0}, {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}});
  return out;
}

std::string ResponsesStreamTranslator::close_item(const char* status) {
  if (current_.is_null()) return {};
  const int64_t index = static_cast<int64_t>(output_.size());
  std::string out;
  json item = current_;
  item["status"] = status;
  if (current_["type"] == "message") {
    const json part = {{"type", "output_text"}, {"text", current_text_}, {"annotations", json::array()}};
    out += event({{"type", "response.output_text.done"}, {"item_id", item["id"]}, {"output_index", index},
                  {"content_index", 0}, {"text", current_text_}, {"logprobs", json::array()}});
    out += event({{"type", "response.content_part.done"}, {"item_id", item["id"]}, {"output_index", index},
                  {"content_index", 0}, {"part", part}});
    item["content"] = json::array({part});
  } else {
    item["arguments"] = current_text_;
    out += event({{"type", "response.function_call_arguments.done"}, {"item_id", item["id"]}, {"output_index", index},
                  {"name", item["name"]}, {"arguments", current_text_}});
  }
  out += event({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  current_ = nullptr;
  current_text_.clear();
  return out;
}

std::string ResponsesStreamTranslator::on_chunk(const json& chunk) {
  if (chunk.contains("error")) {
    const json& e = chunk["error"];
    error_ = {{"code", e.value("code", json()).is_null() ? json(e.value("type", "server_error")) : e["code"]},
              {"message", e.value("message", "")}};
    failed_ = true;
    // The item the reply was cut in ends "incomplete" with what was streamed of it, and stays in
    // the failed response's output (a timeout keeps its text, as a max_output_tokens cut does).
    std::string out = close_item("incomplete");
    return out + event({{"type", "error"}, {"code", error_["code"]}, {"message", error_["message"]}, {"param", nullptr}});
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) usage_ = chunk["usage"];
  if (!chunk.contains("choices") || chunk["choices"].empty()) return {};
  const json& choice = chunk["choices"][0];
  std::string out;
  const json& delta = choice.value("delta", json::object());
  if (delta.contains("content") && delta["content"].is_string() && !delta["content"].get<std::string>().empty()) {
    if (!current_.is_null() && current_["type"] != "message") out += close_item();
    if (current_.is_null()) out += open_message();
    const std::string text = delta["content"].get<std::string>();
    current_text_ += text;
    out += event({{"type", "response.output_text.delta"}, {"item_id", current_["id"]},
                  {"output_index", static_cast<int64_t>(output_.size())}, {"content_index", 0}, {"delta", text},
                  {"logprobs", json::array()}});
  }
  if (delta.contains("tool_calls") && delta["tool_calls"].is_array()) {
    for (const auto& call : delta["tool_calls"]) {
      const json& fn = call.value("function", json::object());
      if (call.contains("id") && call["id"].is_string()) {  // a new call starts
        out += close_item();
        size_t n = 1;
        for (const auto& item : output_) n += item["type"] == "function_call" ? 1 : 0;
        current_ = function_call_item(id_with_prefix(id_, "fc", n), call["id"].get<std::string>(),
                                      fn.value("name", ""), "", "in_progress");
        out += event({{"type", "response.output_item.added"}, {"output_index", static_cast<int64_t>(output_.size())},
                      {"item", current_}});
      }
      if (!current_.is_null() && current_["type"] == "function_call" && fn.contains("arguments") &&
          fn["arguments"].is_string() && !fn["arguments"].get<std::string>().empty()) {
        const std::string args = fn["arguments"].get<std::string>();
        current_text_ += args;
        out += event({{"type", "response.function_call_arguments.delta"}, {"item_id", current_["id"]},
                      {"output_index", static_cast<int64_t>(output_.size())}, {"delta", args}});
      }
    }
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) finish_reason_ = choice["finish_reason"];
  return out;
}

std::string ResponsesStreamTranslator::finish() {
  finished_ = true;
  if (failed_) {
    json r = response_object("failed");
    r["error"] = error_;
    if (usage_.is_object()) r["usage"] = responses_usage(usage_);
    return event({{"type", "response.failed"}, {"response", r}});
  }
  const bool incomplete = finish_reason_ == "length";
  const char* last_status = incomplete ? "incomplete" : "completed";  // of the item the reply ended in
  std::string out = close_item(last_status);
  if (output_.empty()) {  // an empty reply is one empty message
    out += open_message();
    out += close_item(last_status);
  }
  json r = response_object(incomplete ? "incomplete" : "completed");
  if (incomplete) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  r["usage"] = responses_usage(usage_);
  return out + event({{"type", incomplete ? "response.incomplete" : "response.completed"}, {"response", r}});
}

std::string ResponsesStreamTranslator::translate(const std::string& chat_sse) {
  std::string out;
  if (!started_) {
    started_ = true;
    out += event({{"type", "response.created"}, {"response", response_object("in_progress")}});
    out += event({{"type", "response.in_progress"}, {"response", response_object("in_progress")}});
  }
  size_t pos = 0;
  while (pos < chat_sse.size() && !finished_) {
    size_t end = chat_sse.find("\n\n", pos);
    if (end == std::string::npos) end = chat_sse.size();
    const std::string block = chat_sse.substr(pos, end - pos);
    pos = end + 2;
    if (block.rfind(":", 0) == 0) {
      out += block + "\n\n";  // SSE comment (keep-alive)
    } else if (block == "data: [DONE]") {
      out += finish();
    } else if (block.rfind("data: ", 0) == 0) {
      out += on_chunk(json::parse(block.substr(6), nullptr, false));
    }
  }
  return out;
}

}  // namespace qs
