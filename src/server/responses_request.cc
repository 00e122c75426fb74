// translate_responses_request (responses_api.h): Responses request -> chat completion body.
#include <string>

#include "server/api_error.h"
#include "server/json_field.h"
#include "server/responses_api.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

using json_field::field;  // the member unless absent or null

// Message content: a string or an array of input_text / output_text / text parts, joined.
std::string content_text(const ojson& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_param(param, param + " must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& part = content[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    const std::string type = part.is_object() && part.contains("type") && part["type"].is_string() ? part["type"].get<std::string>() : "";
    if (type != "input_text" && type != "output_text" && type != "text") {
      throw invalid_param(p + ".type", p + ": only input_text / output_text parts are supported, got " +
                                           (type.empty() ? part.dump() : "'" + type + "'"));
    }
    if (!part.contains("text") || !part["text"].is_string()) throw invalid_param(p + ".text", p + ".text must be a string");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::string string_field(const ojson& item, const char* name, const std::string& param) {
  if (!item.contains(name) || !item[name].is_string()) {
    throw invalid_param(param + "." + name, param + "." + name + " must be a string");
  }
  return item[name].get<std::string>();
}

// Items -> chat messages; consecutive function_call items form one assistant message. `sources`
// (empty on entry) gets, per chat message, the input path it came from (its first item).
ojson input_messages(const ojson& input, std::vector<std::string>& sources) {
  ojson messages = ojson::array();
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    sources.push_back("input");
    return messages;
  }
  if (!input.is_array() || input.empty()) throw invalid_param("input", "input must be a string or a non-empty array of items");
  for (size_t i = 0; i < input.size(); ++i) {
    const ojson& item = input[i];
    const std::string param = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw invalid_param(param, param + " must be an object");
    if (item.contains("type") && !item["type"].is_string()) throw invalid_param(param + ".type", param + ".type must be a string");
    const std::string type = json_field::string_or(item, "type", "message");
    if (type == "message") {
      const std::string role = item.contains("role") && item["role"].is_string() ? item["role"].get<std::string>() : "";
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        throw invalid_param(param + ".role", param + ".role must be one of user, assistant, system, developer");
      }
      if (!item.contains("content")) throw invalid_param(param + ".content", param + ".content is required");
      messages.push_back({{"role", role == "developer" ? "system" : role},
                          {"content", content_text(item["content"], param + ".content")}});
    } else if (type == "function_call") {
      ojson call = {{"id", string_field(item, "call_id", param)},
                    {"type", "function"},
                    {"function", {{"name", string_field(item, "name", param)}, {"arguments", string_field(item, "arguments", param)}}}};
      const bool extend = !messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls");
      if (!extend) messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array()}});  // "": templates reject null
      messages.back()["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      const std::string call_id = string_field(item, "call_id", param);
      if (!item.contains("output")) throw invalid_param(param + ".output", param + ".output is required");
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", content_text(item["output"], param + ".output")}});
    } else if (type == "reasoning") {
      continue;  // earlier reasoning is not replayed into the prompt (as the chat template drops it)
    } else {
      throw invalid_param(param + ".type", param + ".type '" + type +
                                               "' is not supported (message, function_call, function_call_output)");
    }
    while (sources.size() < messages.size()) sources.push_back(param);
  }
  return messages;
}

ojson chat_tools(const ojson& tools) {
  if (!tools.is_array()) throw invalid_param("tools", "tools must be an array");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string param = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || json_field::string_or(t, "type", "") != "function") {
      throw invalid_param(param + ".type", param + ": only function tools ({\"type\": \"function\", \"name\", \"parameters\"}) are supported");
    }
    ojson fn = {{"name", string_field(t, "name", param)}};
    if (const ojson* d = field(t, "description")) {
      if (!d->is_string()) throw invalid_param(param + ".description", param + ".description must be a string");
      fn["description"] = *d;
    }
    if (const ojson* p = field(t, "parameters")) {
      if (!p->is_object()) throw invalid_param(param + ".parameters", param + ".parameters must be a JSON Schema object");
      fn["parameters"] = *p;
    }
    if (const ojson* s = field(t, "strict")) {
      if (!s->is_boolean()) throw invalid_param(param + ".strict", param + ".strict must be a boolean");
      fn["strict"] = *s;
    }
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

ojson chat_tool_choice(const ojson& choice) {
  if (choice.is_string()) {
    const std::string c = choice.get<std::string>();
    if (c != "auto" && c != "none" && c != "required") throw invalid_param("tool_choice", "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
    return choice;
  }
  if (choice.is_object() && json_field::string_or(choice, "type", "") == "function" && choice.contains("name") && choice["name"].is_string()) {
    return {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  }
  throw invalid_param("tool_choice", "tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
}

// text.format -> chat response_format.
ojson chat_response_format(const ojson& text) {
  if (!text.is_object()) throw invalid_param("text", "text must be an object");
  const ojson* format = field(text, "format");
  if (format == nullptr) return nullptr;
  const std::string type = format->is_object() && format->contains("type") && (*format)["type"].is_string() ? (*format)["type"].get<std::string>() : "";
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema") throw invalid_param("text.format.type", "text.format.type must be text, json_object or json_schema");
  ojson schema = {{"name", string_field(*format, "name", "text.format")}};
  if (!format->contains("schema") || !(*format)["schema"].is_object()) {
    throw invalid_param("text.format.schema", "text.format.schema must be a JSON Schema object");
  }
  schema["schema"] = (*format)["schema"];
  if (const ojson* strict = field(*format, "strict")) {
    if (!strict->is_boolean()) throw invalid_param("text.format.strict", "text.format.strict must be a boolean");
    schema["strict"] = *strict;
  }
  return {{"type", "json_schema"}, {"json_schema", schema}};
}

}  // namespace

ResponsesRequest translate_responses_request(const ojson& body) {
  if (!body.is_object()) throw body_not_an_object(body.type_name());
  if (field(body, "previous_response_id") != nullptr) {
    throw invalid_param("previous_response_id",
                        "previous_response_id is not supported: this server stores no responses (store: false); "
                        "send the whole conversation in input");
  }
  if (field(body, "conversation") != nullptr) {
    throw invalid_param("conversation", "conversation is not supported: this server stores no conversations; send the whole conversation in input");
  }
  ResponsesRequest r;
  ojson& chat = r.chat_body;
  chat = ojson::object();
  ojson messages = ojson::array();
  if (const ojson* instructions = field(body, "instructions")) {
    if (!instructions->is_string()) throw invalid_param("instructions", "instructions must be a string");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
    r.message_params.push_back("instructions");
  }
  const ojson* input = field(body, "input");
  if (input == nullptr) throw invalid_param("input", "input is required");
  std::vector<std::string> sources;
  for (auto& m : input_messages(*input, sources)) messages.push_back(std::move(m));
  r.message_params.insert(r.message_params.end(), sources.begin(), sources.end());
  chat["messages"] = std::move(messages);
  // Same name and meaning as in chat completions (parse_chat_request checks type and range).
  for (const char* name : {"model", "temperature", "top_p", "top_k", "seed", "parallel_tool_calls"}) {
    if (const ojson* v = field(body, name)) chat[name] = *v;
  }
  json_field::forward_server_extensions(body, chat);
  if (const ojson* v = field(body, "max_output_tokens")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1) throw invalid_param("max_output_tokens", "max_output_tokens must be an integer >= 1");
    chat["max_tokens"] = *v;
  }
  if (const ojson* v = field(body, "stream")) {
    if (!v->is_boolean()) throw invalid_param("stream", "stream must be a boolean");
    r.stream = v->get<bool>();
    chat["stream"] = r.stream;
  }
  for (const char* name : {"store", "background"}) {
    if (const ojson* v = field(body, name); v != nullptr && !v->is_boolean()) {
      throw invalid_param(name, std::string(name) + " must be a boolean");
    }
  }
  if (const ojson* v = field(body, "background"); v != nullptr && v->get<bool>()) {
    throw invalid_param("background", "background responses are not supported (stateless server)");
  }
  if (const ojson* tools = field(body, "tools")) chat["tools"] = chat_tools(*tools);
  if (const ojson* choice = field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*choice);
  if (const ojson* text = field(body, "text")) {
    if (ojson format = chat_response_format(*text); !format.is_null()) chat["response_format"] = std::move(format);
  }
  if (const ojson* metadata = field(body, "metadata"); metadata != nullptr && !metadata->is_object()) {
    throw invalid_param("metadata", "metadata must be an object");
  }
  nlohmann::json& echo = r.echo;
  echo = nlohmann::json::object();
  auto echo_field = [&](const char* name, nlohmann::json fallback) {
    const ojson* v = field(body, name);
    echo[name] = v != nullptr ? nlohmann::json::parse(v->dump()) : std::move(fallback);
  };
  echo_field("instructions", nullptr);
  echo_field("max_output_tokens", nullptr);
  echo_field("temperature", 1.0);
  echo_field("top_p", 1.0);
  echo_field("tools", nlohmann::json::array());
  echo_field("tool_choice", "auto");
  echo_field("parallel_tool_calls", true);
  echo_field("metadata", nlohmann::json::object());
  echo_field("text", {{"format", {{"type", "text"}}}});
  echo["previous_response_id"] = nullptr;
  echo["store"] = false;
  return r;
}

}  // namespace qs
