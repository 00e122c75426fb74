// Optional members of a client's JSON body. OpenAI, vLLM and Anthropic treat a member sent as null
// like one left out, so every request parser asks for members through this one lookup.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace qs::json_field {

/// The member `name` of `body`, or nullptr when it is absent or null (or `body` is not an object).
inline const nlohmann::ordered_json* field(const nlohmann::ordered_json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

/// The string member `name` of `object` for comparisons in request checks: its value when it is a
/// string, `fallback` when it is absent or null (or `object` is not an object), and its JSON text
/// (e.g. `1`, `{}`) for any other type, so that a wrong-typed discriminator such as `"type": 1`
/// matches no expected value and reaches the caller's 400 (nlohmann's value() would throw a
/// type_error, a 500).
template <typename Json>
std::string string_or(const Json& object, const char* name, const std::string& fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return fallback;
  return it->is_string() ? it->template get<std::string>() : it->dump();
}

/// qwenserve's own per-request fields of /v1/chat/completions (`timeout` in seconds, vLLM's
/// `priority`, `slo_ttft_ms`) that the translated routes (/v1/messages, /v1/responses) pass on to
/// the chat request unchanged, so they mean the same on every generation route; the chat parser
/// checks their types and ranges (a 400 naming the same field).
inline constexpr const char* kServerExtensionFields[] = {"timeout", "priority", "slo_ttft_ms"};

/// Copies the kServerExtensionFields present in `body` into `chat_body`.
inline void forward_server_extensions(const nlohmann::ordered_json& body, nlohmann::ordered_json& chat_body) {
  for (const char* name : kServerExtensionFields) {
    if (const nlohmann::ordered_json* v = field(body, name)) chat_body[name] = *v;
  }
}

}  // namespace qs::json_field
