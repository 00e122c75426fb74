// translate_anthropic_request (anthropic_api.h): Messages request -> chat completion body.
#include <string>

#include "server/anthropic_api.h"
#include "server/json_field.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

using json_field::field;  // the member unless absent or null

std::string block_type(const ojson& block) {
  return block.is_object() && block.contains("type") && block["type"].is_string() ? block["type"].get<std::string>() : "";
}

std::string text_of(const ojson& block, const std::string& param) {
  if (!block.contains("text") || !block["text"].is_string()) throw invalid_param(param + ".text", param + ".text must be a string");
  return block["text"].get<std::string>();
}

// A string, or an array of text blocks (joined); `what` names the allowed form in errors.
std::string text_content(const ojson& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_param(param, param + " must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (block_type(content[i]) != "text") throw invalid_param(p + ".type", p + ": only text blocks are supported here");
    text += text_of(content[i], p);
  }
  return text;
}

// One Messages message -> one or more chat messages (tool results become tool messages).
void append_message(const ojson& m, const std::string& param, ojson& out) {
  if (!m.is_object()) throw invalid_param(param, param + " must be an object");
  const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
  if (role != "user" && role != "assistant") throw invalid_param(param + ".role", param + ".role must be user or assistant");
  if (!m.contains("content")) throw invalid_param(param + ".content", param + ".content is required");
  const ojson& content = m["content"];
  if (content.is_string()) {
    out.push_back({{"role", role}, {"content", content}});
    return;
  }
  if (!content.is_array()) throw invalid_param(param + ".content", param + ".content must be a string or an array of content blocks");
  std::string text;
  ojson tool_calls = ojson::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& block = content[i];
    const std::string p = param + ".content[" + std::to_string(i) + "]";
    const std::string type = block_type(block);
    if (type == "text") {
      text += text_of(block, p);
    } else if (type == "tool_use" && role == "assistant") {
      if (!block.contains("id") || !block["id"].is_string()) throw invalid_param(p + ".id", p + ".id must be a string");
      if (!block.contains("name") || !block["name"].is_string()) throw invalid_param(p + ".name", p + ".name must be a string");
      if (!block.contains("input") || !block["input"].is_object()) throw invalid_param(p + ".input", p + ".input must be an object");
      tool_calls.push_back({{"id", block["id"]}, {"type", "function"},
                            {"function", {{"name", block["name"]}, {"arguments", block["input"].dump()}}}});
    } else if (type == "tool_result" && role == "user") {
      if (!block.contains("tool_use_id") || !block["tool_use_id"].is_string()) {
        throw invalid_param(p + ".tool_use_id", p + ".tool_use_id must be a string");
      }
      const std::string result = block.contains("content") && !block["content"].is_null() ? text_content(block["content"], p + ".content") : "";
      out.push_back({{"role", "tool"}, {"tool_call_id", block["tool_use_id"]}, {"content", result}});
    } else if (type == "thinking" || type == "redacted_thinking") {
      continue;  // earlier thinking is not replayed into the prompt
    } else {
      throw invalid_param(p + ".type", p + ".type '" + type + "' is not supported in " +
                                           (role == "assistant" ? "an assistant" : "a user") +
                                           " message (text, tool_use in assistant turns, tool_result in user turns)");
    }
  }
  if (role == "assistant") {
    ojson msg = {{"role", "assistant"}, {"content", text}};  // "" with only tool calls: templates reject null
    if (!tool_calls.empty()) msg["tool_calls"] = std::move(tool_calls);
    out.push_back(std::move(msg));
  } else if (!text.empty() || out.empty() || out.back()["role"] != "tool") {
    out.push_back({{"role", "user"}, {"content", text}});
  }
}

ojson chat_tools(const ojson& tools) {
  if (!tools.is_array()) throw invalid_param("tools", "tools must be an array");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) throw invalid_param(p, p + " must be an object");
    if (const ojson* type = field(t, "type"); type != nullptr && *type != "custom") {
      throw invalid_param(p + ".type", p + ": only client tools ({name, description, input_schema}) are supported");
    }
    if (!t.contains("name") || !t["name"].is_string() || t["name"].get<std::string>().empty()) {
      throw invalid_param(p + ".name", p + ".name must be a non-empty string");
    }
    if (!t.contains("input_schema") || !t["input_schema"].is_object()) {
      throw invalid_param(p + ".input_schema", p + ".input_schema must be a JSON Schema object");
    }
    ojson fn = {{"name", t["name"]}};  // OpenAI's key order: the template prints the tool as JSON
    if (const ojson* d = field(t, "description")) {
      if (!d->is_string()) throw invalid_param(p + ".description", p + ".description must be a string");
      fn["description"] = *d;
    }
    fn["parameters"] = t["input_schema"];
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

ojson chat_tool_choice(const ojson& choice) {
  const std::string type = block_type(choice);
  if (type == "auto") return "auto";
  if (type == "any") return "required";
  if (type == "none") return "none";
  if (type == "tool") {
    if (!choice.contains("name") || !choice["name"].is_string()) throw invalid_param("tool_choice.name", "tool_choice.name must be a string");
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  throw invalid_param("tool_choice", "tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": \"tool\", \"name\": ...}");
}

}  // namespace

AnthropicRequest translate_anthropic_request(const ojson& body) {
  if (!body.is_object()) throw body_not_an_object(body.type_name());
  AnthropicRequest r;
  ojson& chat = r.chat_body;
  chat = ojson::object();
  const ojson* max_tokens = field(body, "max_tokens");
  if (max_tokens == nullptr) throw invalid_param("max_tokens", "max_tokens: Field required");
  if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1) {
    throw invalid_param("max_tokens", "max_tokens must be an integer >= 1");
  }
  chat["max_tokens"] = *max_tokens;
  ojson messages = ojson::array();
  if (const ojson* system = field(body, "system")) {
    messages.push_back({{"role", "system"}, {"content", text_content(*system, "system")}});
    r.message_params.push_back("system");
  }
  const ojson* in = field(body, "messages");
  if (in == nullptr) throw invalid_param("messages", "messages: Field required");
  if (!in->is_array() || in->empty()) throw invalid_param("messages", "messages must be a non-empty array");
  for (size_t i = 0; i < in->size(); ++i) {
    append_message((*in)[i], "messages[" + std::to_string(i) + "]", messages);
    while (r.message_params.size() < messages.size()) r.message_params.push_back("messages[" + std::to_string(i) + "]");
  }
  // A final assistant message is a prefill the reply continues from its last character (Anthropic's
  // Messages API); like Anthropic, its text may not end in whitespace, and an empty one is no
  // prefill (left out, not rendered as an empty finished turn). One with tool calls is an ordinary
  // turn.
  if (messages.size() > 1 && messages.back()["role"] == "assistant" && !messages.back().contains("tool_calls") &&
      messages.back()["content"] == "") {
    messages.erase(messages.size() - 1);
    r.message_params.pop_back();
  }
  const ojson& last = messages.back();
  const bool prefill = last["role"] == "assistant" && !last.contains("tool_calls") && last["content"].is_string() &&
                       !last["content"].get<std::string>().empty();
  if (prefill) {
    const std::string& text = last["content"].get_ref<const std::string&>();
    if (std::string(" \t\r\n").find(text.back()) != std::string::npos) {
      const std::string param = "messages[" + std::to_string(in->size() - 1) + "].content";
      throw invalid_param(param, param + ": final assistant content cannot end with trailing whitespace");
    }
  }
  chat["messages"] = std::move(messages);
  if (prefill) {
    chat["add_generation_prompt"] = false;
    chat["continue_final_message"] = true;
  }
  if (const ojson* t = field(body, "temperature")) {
    if (!t->is_number() || t->get<double>() < 0 || t->get<double>() > 1) throw invalid_param("temperature", "temperature must be a number in [0, 1]");
    chat["temperature"] = *t;
  }
  for (const char* name : {"model", "top_p", "top_k"}) {
    if (const ojson* v = field(body, name)) chat[name] = *v;  // checked by parse_chat_request
  }
  json_field::forward_server_extensions(body, chat);
  if (const ojson* model = field(body, "model"); model != nullptr && !model->is_string()) {
    throw invalid_param("model", "model must be a string");
  }
  if (const ojson* stops = field(body, "stop_sequences")) {
    if (!stops->is_array()) throw invalid_param("stop_sequences", "stop_sequences must be an array of strings");
    for (const auto& s : *stops) {
      if (!s.is_string() || s.get<std::string>().empty()) throw invalid_param("stop_sequences", "stop_sequences must be an array of non-empty strings");
      r.stop_sequences.push_back(s.get<std::string>());
    }
    if (!r.stop_sequences.empty()) chat["stop"] = *stops;
  }
  if (const ojson* v = field(body, "stream")) {
    if (!v->is_boolean()) throw invalid_param("stream", "stream must be a boolean");
    r.stream = v->get<bool>();
    chat["stream"] = r.stream;
  }
  if (const ojson* tools = field(body, "tools")) chat["tools"] = chat_tools(*tools);
  if (const ojson* choice = field(body, "tool_choice")) {
    chat["tool_choice"] = chat_tool_choice(*choice);
    if (const ojson* d = field(*choice, "disable_parallel_tool_use")) {
      if (!d->is_boolean()) throw invalid_param("tool_choice.disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use must be a boolean");
      chat["parallel_tool_calls"] = !d->get<bool>();
    }
  }
  return r;
}

}  // namespace qs
