#include "server/openai_request.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "io/ordered_json_parser.h"
#include "server/api_error.h"
#include "server/chat_tools.h"
#include "server/json_field.h"
#include "tokenizer/utf8.h"

namespace qs {
namespace {

using json = nlohmann::ordered_json;

std::string type_name(const json& v) { return v.type_name(); }

using json_field::field;  // the member unless absent or null

double number_in(const json& body, const char* name, double lo, double hi, double fallback) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) throw invalid_param(name, std::string(name) + " must be a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    // json's number formatting: shortest round-trip form ("2.0", not "2.000000").
    throw invalid_param(name, std::string(name) + " must be in [" + json(lo).dump() + ", " +
                                  json(hi).dump() + "], got " + v->dump());
  }
  return x;
}

// top_p: nucleus sampling keeps the smallest set of tokens whose probability reaches top_p, so
// it is a number in (0, 1] (0 would keep nothing); default 1.
double top_p(const json& body) {
  const json* v = field(body, "top_p");
  if (v == nullptr) return 1.0;
  if (!v->is_number()) throw invalid_param("top_p", "top_p must be a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!(x > 0.0 && x <= 1.0)) throw invalid_param("top_p", "top_p must be in (0.0, 1.0], got " + v->dump());
  return x;
}

std::optional<int64_t> integer_in(const json& body, const char* name, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) {
    throw invalid_param(name, std::string(name) + " must be an integer, got " + v->dump());
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    throw invalid_param(name, std::string(name) + " must be in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "], got " + std::to_string(x));
  }
  return x;
}

// `prefix`: the path of `body` inside the request ("stream_options."), so that the 400's param
// names the nested field in full.
bool boolean(const json& body, const char* name, bool fallback, const std::string& prefix = {}) {
  const json* v = field(body, name);
  if (v == nullptr) return fallback;
  const std::string param = prefix + name;
  if (!v->is_boolean()) throw invalid_param(param, param + " must be a boolean, got " + v->dump());
  return v->get<bool>();
}

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  if (v == nullptr) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw invalid_param("stop", "stop must be a string or an array of strings");
  if (v->size() > 16) throw invalid_param("stop", "stop accepts at most 16 strings");
  std::vector<std::string> out;
  for (const auto& s : *v) {
    if (!s.is_string()) throw invalid_param("stop", "stop must be a string or an array of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& body, int32_t vocab_size) {
  const json* v = field(body, "logit_bias");
  if (v == nullptr) return {};
  if (!v->is_object()) throw invalid_param("logit_bias", "logit_bias must be an object of token id -> bias");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, bias] : v->items()) {
    long long id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id >= vocab_size) {
      throw invalid_param("logit_bias", "logit_bias key '" + key + "' is not a token id in [0, " +
                                            std::to_string(vocab_size) + ")");
    }
    if (!bias.is_number() || bias.get<double>() < -100 || bias.get<double>() > 100) {
      throw invalid_param("logit_bias", "logit_bias values must be numbers in [-100, 100]");
    }
    out.emplace_back(static_cast<int32_t>(id), bias.get<float>());
  }
  return out;
}

// vLLM's "stop_token_ids": null or an array of at most kMaxStopTokenIds token ids in
// [0, vocab_size) (duplicates dropped). The bound keeps the per-token stop check and min_tokens'
// per-row suppression list short.
constexpr size_t kMaxStopTokenIds = 1024;

std::vector<int32_t> parse_stop_token_ids(const json& body, int32_t vocab_size) {
  const json* v = field(body, "stop_token_ids");
  if (v == nullptr) return {};
  if (!v->is_array()) throw invalid_param("stop_token_ids", "stop_token_ids must be an array of token ids");
  if (v->size() > kMaxStopTokenIds) {
    throw invalid_param("stop_token_ids", "stop_token_ids must have at most " + std::to_string(kMaxStopTokenIds) +
                                              " ids, got " + std::to_string(v->size()));
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& id = (*v)[i];
    const std::string param = "stop_token_ids[" + std::to_string(i) + "]";
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      throw invalid_param(param, param + " must be a token id in [0, " + std::to_string(vocab_size) + "), got " +
                                     id.dump());
    }
    const auto t = static_cast<int32_t>(id.get<int64_t>());
    if (std::find(ids.begin(), ids.end(), t) == ids.end()) ids.push_back(t);
  }
  return ids;
}

GenerationFields parse_generation_fields(const json& body, int32_t vocab_size) {
  GenerationFields f;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw invalid_param("model", "model must be a string");
    f.model = m->get<std::string>();
  }
  // "user" (an end-user id for abuse monitoring) is not used here, but a non-string is a client
  // bug OpenAI rejects too.
  if (const json* user = field(body, "user"); user != nullptr && !user->is_string()) {
    throw invalid_param("user", std::string("user must be a string, not ") + user->type_name());
  }
  auto max_tokens = integer_in(body, "max_completion_tokens", 1, INT32_MAX);
  if (!max_tokens) max_tokens = integer_in(body, "max_tokens", 1, INT32_MAX);
  if (max_tokens) f.max_tokens = static_cast<int32_t>(*max_tokens);
  SamplingParams& s = f.sampling;
  s.temperature = static_cast<float>(number_in(body, "temperature", 0.0, 2.0, 1.0));
  s.top_p = static_cast<float>(top_p(body));
  s.top_k = static_cast<int32_t>(integer_in(body, "top_k", -1, vocab_size).value_or(0));
  s.min_p = static_cast<float>(number_in(body, "min_p", 0.0, 1.0, 0.0));
  s.presence_penalty = static_cast<float>(number_in(body, "presence_penalty", -2.0, 2.0, 0.0));
  s.frequency_penalty = static_cast<float>(number_in(body, "frequency_penalty", -2.0, 2.0, 0.0));
  s.repetition_penalty = static_cast<float>(number_in(body, "repetition_penalty", 1e-6, 100.0, 1.0));
  if (auto seed = integer_in(body, "seed", INT64_MIN, INT64_MAX)) s.seed = static_cast<uint64_t>(*seed);
  s.logit_bias = parse_logit_bias(body, vocab_size);
  f.stop = parse_stop(body);
  f.n = static_cast<int32_t>(integer_in(body, "n", 1, 16).value_or(1));
  f.stream = boolean(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw invalid_param("stream_options", "stream_options must be an object");
    // OpenAI and vLLM refuse it on a non-streaming request (its fields shape the event stream).
    if (!f.stream) throw invalid_param("stream_options", "stream_options is only allowed when stream is true");
    f.include_usage = boolean(*so, "include_usage", false, "stream_options.");
    f.include_timings = boolean(*so, "include_timings", false, "stream_options.");
  }
  f.priority = static_cast<int32_t>(integer_in(body, "priority", INT32_MIN, INT32_MAX).value_or(0));
  if (field(body, "slo_ttft_ms") != nullptr) {
    f.slo_ttft_ms = number_in(body, "slo_ttft_ms", 0.0, 1e9, 0.0);
    if (*f.slo_ttft_ms <= 0.0) throw invalid_param("slo_ttft_ms", "slo_ttft_ms must be a number of milliseconds > 0");
  }
  f.ignore_eos = boolean(body, "ignore_eos", false);
  f.min_tokens = static_cast<int32_t>(integer_in(body, "min_tokens", 0, INT32_MAX).value_or(0));
  if (f.max_tokens && f.min_tokens > *f.max_tokens) {
    throw invalid_param("min_tokens", "min_tokens must be less than or equal to max_tokens (" +
                                          std::to_string(*f.max_tokens) + "), got " + std::to_string(f.min_tokens));
  }
  f.stop_token_ids = parse_stop_token_ids(body, vocab_size);
  f.echo = boolean(body, "echo", false);
  if (field(body, "timeout") != nullptr) {
    f.timeout_s = number_in(body, "timeout", 0.0, 1e7, 0.0);
    if (*f.timeout_s <= 0.0) throw invalid_param("timeout", "timeout must be a number of seconds > 0");
  }
  f.structured = parse_structured_output(body);
  return f;
}

// Content as a string: a string, null, or an array of {"type": "text", "text": ...} parts.
json normalize_content(const json& content, const std::string& param) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) throw invalid_param(param, param + " must be a string, null or an array of parts");
  // OpenAI answers an empty array with a 400 ("expected an array with minimum length 1").
  if (content.empty()) throw invalid_param(param, param + " must not be an empty array");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string pp = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw invalid_param(pp, pp + " must be an object {\"type\": \"text\", \"text\": ...}");
    if (json_field::string_or(part, "type", "") != "text") {
      throw invalid_param(pp + ".type", pp + ".type: only {\"type\": \"text\", \"text\": ...} parts are supported, got " +
                                            (part.contains("type") ? part["type"].dump() : std::string("none")));
    }
    if (!part.contains("text") || part["text"].is_null()) throw invalid_param(pp + ".text", pp + ".text is required");
    if (!part["text"].is_string()) {
      throw invalid_param(pp + ".text", pp + ".text must be a string, got " + type_name(part["text"]));
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// A string-or-null member `key` of `obj` (absent is fine): anything else is a 400 naming it.
void check_optional_string(const json& obj, const char* key, const std::string& param) {
  if (obj.contains(key) && !obj[key].is_null() && !obj[key].is_string()) {
    throw invalid_param(param + "." + key, param + "." + key + " must be a string, got " + type_name(obj[key]));
  }
}

// One tool call of an assistant message, as the chat template needs it (Qwen3 prints
// `{"name": <name>, "arguments": <object as JSON>}`): function.name a non-empty string,
// function.arguments a JSON object or a string holding one (decoded here; absent, null or "" is
// {} as vLLM does); a string nesting deeper than the body limit stays a string. `param` is
// "messages[i].tool_calls[j]".
json parse_tool_call(const json& call, const std::string& param) {
  if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
    throw invalid_param(param + ".function", param + ".function must be an object {name, arguments}");
  }
  check_optional_string(call, "id", param);
  if (call.contains("type") && !call["type"].is_null() && call["type"] != "function") {
    throw invalid_param(param + ".type", param + ".type must be \"function\"");
  }
  json c = call;
  json& fn = c["function"];
  const std::string fp = param + ".function";
  if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty()) {
    throw invalid_param(fp + ".name", fp + ".name must be a non-empty string");
  }
  const std::string ap = fp + ".arguments";
  json& args = fn["arguments"];  // inserts null when absent
  if (args.is_null() || (args.is_string() && args.get<std::string>().empty())) {
    args = json::object();
  } else if (args.is_string()) {
    json decoded;
    try {
      decoded = parse_json_limited(args.get<std::string>());
    } catch (const ApiError& e) {
      if (e.code() == "json_too_deep") return c;  // valid but deep: the template prints it verbatim
      throw invalid_param(ap, ap + " must be a JSON object (as a string or an object): " + e.what());
    }
    if (!decoded.is_object()) throw invalid_param(ap, ap + " must encode a JSON object, got " + type_name(decoded));
    args = std::move(decoded);
  } else if (!args.is_object()) {
    throw invalid_param(ap, ap + " must be a JSON object or a string holding one, got " + type_name(args));
  }
  return c;
}

json parse_message(const json& m, const std::string& param) {
  if (!m.is_object()) throw invalid_param(param, param + " must be an object");
  const std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
  if (role != "system" && role != "user" && role != "assistant" && role != "tool" && role != "developer") {
    throw invalid_param(param + ".role", param + ".role must be one of system, developer, user, assistant, tool");
  }
  json msg = m;
  if (role == "developer") msg["role"] = "system";
  msg["content"] = normalize_content(m.contains("content") ? m["content"] : json(nullptr), param + ".content");
  if (msg["content"].is_null() && role != "assistant") {
    throw invalid_param(param + ".content", param + ".content is required for role " + role);
  }
  // OpenAI SDKs send an assistant tool-call turn with content null (or none); chat templates
  // (Qwen3's) expect a string there.
  if (msg["content"].is_null()) msg["content"] = "";
  check_optional_string(m, "name", param);
  check_optional_string(m, "reasoning_content", param);  // Qwen3's template strips it as a string
  check_optional_string(m, "tool_call_id", param);
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (!m["tool_calls"].is_array()) throw invalid_param(param + ".tool_calls", param + ".tool_calls must be an array");
    json calls = json::array();
    for (size_t j = 0; j < m["tool_calls"].size(); ++j) {
      calls.push_back(parse_tool_call(m["tool_calls"][j], param + ".tool_calls[" + std::to_string(j) + "]"));
    }
    msg["tool_calls"] = calls;
  }
  return msg;
}

// True when the message is an assistant turn that made tool calls.
bool made_tool_calls(const json& msg) {
  return msg["role"] == "assistant" && msg.contains("tool_calls") && msg["tool_calls"].is_array() &&
         !msg["tool_calls"].empty();
}

json parse_messages(const json& body) {
  const json* messages = field(body, "messages");
  if (messages == nullptr) throw invalid_param("messages", "messages is required");
  if (!messages->is_array() || messages->empty()) {
    throw invalid_param("messages", "messages must be a non-empty array");
  }
  json out = json::array();
  size_t last_non_tool = SIZE_MAX;  // index of the latest message that is not a tool result
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    json msg = parse_message((*messages)[i], param);
    // As OpenAI: a tool result answers the tool calls of the assistant turn before it.
    if (msg["role"] == "tool" && (last_non_tool == SIZE_MAX || !made_tool_calls(out[last_non_tool]))) {
      throw invalid_param(param + ".role", param + ".role: a message with role 'tool' must follow an assistant message "
                                                   "with tool_calls (or another tool message answering them)");
    }
    if (msg["role"] != "tool") last_non_tool = i;
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

json parse_json_limited(std::string_view body) {
  try {
    return parse_ordered_json(body, kMaxJsonDepth);  // linear in the body's size
  } catch (const JsonTooDeep&) {
    throw ApiError(400, "JSON body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", "",
                   "invalid_request_error", "json_too_deep");
  } catch (const json::exception& e) {
    // The parser's message quotes the bytes it last read, which may be invalid UTF-8 (a message
    // that would not serialise as JSON): ill-formed sequences become U+FFFD. Its
    // "[json.exception.parse_error.101] " prefix names the library's internals: left out.
    std::string what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string::npos) what.erase(0, what.find("] ") + 2);
    throw ApiError(400, "malformed JSON body: " + tokenizer_detail::utf8_lossy(what), "", "invalid_request_error",
                   "invalid_json");
  }
}

ChatRequest parse_chat_request(const json& body, int32_t vocab_size) {
  if (!body.is_object()) throw body_not_an_object(body.type_name());
  ChatRequest r;
  r.fields = parse_generation_fields(body, vocab_size);
  r.fields.logprobs = boolean(body, "logprobs", false);
  r.fields.top_logprobs = static_cast<int32_t>(integer_in(body, "top_logprobs", 0, 20).value_or(0));
  if (r.fields.top_logprobs > 0 && !r.fields.logprobs) {  // as vLLM: the alternatives would be dropped
    throw invalid_param("top_logprobs", "top_logprobs needs logprobs: true");
  }
  r.messages = parse_messages(body);
  if (const json* tools = field(body, "tools")) {
    validate_chat_tools(*tools);  // always: the chat template prints every tool into the prompt
    r.tools = *tools;
  }
  if (const json* choice = field(body, "tool_choice")) r.tool_choice = *choice;
  r.parallel_tool_calls = boolean(body, "parallel_tool_calls", true);
  if (auto forced = tool_choice_grammar(r.tools, r.tool_choice, r.parallel_tool_calls)) {
    if (r.fields.structured) {
      throw invalid_param("tool_choice", "tool_choice " + r.tool_choice.dump() + " forces a tool call, so " +
                                             r.fields.structured->param + " cannot constrain the output too");
    }
    r.fields.structured = std::move(forced);
  }
  if (const json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) throw invalid_param("chat_template_kwargs", "chat_template_kwargs must be an object");
    r.chat_template_kwargs = *kwargs;
  }
  r.add_generation_prompt = boolean(body, "add_generation_prompt", true);
  r.continue_final_message = boolean(body, "continue_final_message", false);
  if (r.add_generation_prompt && r.continue_final_message) {
    throw invalid_param("continue_final_message",
                        "continue_final_message continues the final message, so it needs add_generation_prompt: false");
  }
  return r;
}

CompletionRequest parse_completion_request(const json& body, int32_t vocab_size) {
  if (!body.is_object()) throw body_not_an_object(body.type_name());
  CompletionRequest r;
  r.fields = parse_generation_fields(body, vocab_size);
  // Completions API: logprobs is an integer 0..5 (alternatives per token).
  if (auto lp = integer_in(body, "logprobs", 0, 20)) {
    r.fields.logprobs = true;
    r.fields.top_logprobs = static_cast<int32_t>(*lp);
  }
  const json* prompt = field(body, "prompt");
  if (prompt == nullptr) throw invalid_param("prompt", "prompt is required");
  // OpenAI's prompt is a string, a list of strings, a list of token ids or a list of token-id
  // lists; a list of one string or of one id list is one prompt.
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];
  }
  if (prompt->is_array()) {
    for (const auto& item : *prompt) {
      if (item.is_string() || item.is_array()) {
        throw invalid_param("prompt", "batched prompts (a list of " + std::to_string(prompt->size()) +
                                          " prompts) are not supported: send one prompt per request");
      }
    }
  }
  if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
  } else if (prompt->is_array() && !prompt->empty()) {
    for (const auto& id : *prompt) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
        throw invalid_param("prompt", "prompt token ids must be integers in [0, " + std::to_string(vocab_size) + ")");
      }
      r.prompt_ids.push_back(id.get<int32_t>());
    }
  } else {
    throw invalid_param("prompt", "prompt must be a string or a non-empty array of token ids");
  }
  if (r.prompt_text && r.prompt_text->empty()) throw invalid_param("prompt", "prompt must not be empty");
  return r;
}

}  // namespace qs
