// Validation of a Chat Completions request's `tools` (OpenAI API reference, Chat Completions,
// "tools": an array of {"type": "function", "function": {"name", "description", "parameters",
// "strict"}}). Every tool is checked whether or not tool_choice forces a call, since the chat
// template prints each one into the prompt.
#pragma once

#include <nlohmann/json.hpp>

namespace qs {

/// Checks `tools` (the body's "tools" member, not null) as OpenAI documents it: an array whose
/// elements are objects with `type` "function" (absent is taken as "function", as vLLM does) and
/// a `function` object holding a non-empty string `name`, an optional string `description`, an
/// optional JSON-schema object `parameters` and an optional boolean `strict` (null counts as
/// absent). Throws ApiError(400, invalid_request_error) whose param names the first offending
/// field: "tools", "tools[i]", "tools[i].type", "tools[i].function" or
/// "tools[i].function.name" / ".description" / ".parameters" / ".strict".
void validate_chat_tools(const nlohmann::ordered_json& tools);

}  // namespace qs
