// Optional members of a client's JSON body. OpenAI, vLLM and Anthropic treat a member sent as null
// like one left out, so every request parser asks for members through this one lookup.
#pragma once

#include <nlohmann/json.hpp>

namespace qs::json_field {

/// The member `name` of `body`, or nullptr when it is absent or null (or `body` is not an object).
inline const nlohmann::ordered_json* field(const nlohmann::ordered_json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace qs::json_field
