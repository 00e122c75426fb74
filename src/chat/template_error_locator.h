// Which message and field of a conversation a chat-template render error comes from.
//
// A template error names a template line ("chat template line 31: ..."), not the request field a
// client has to fix. When rendering fails, the conversation is rendered again with parts left
// out, and the part the error follows is named:
//  1. the message: the shortest prefix messages[0..i] that still fails with the same error
//     (binary search over the prefix length, so O(log n) renders) names messages[i]; an error
//     that an empty conversation reproduces is not the messages' fault (no location);
//  2. the field: the first key of messages[i] (other than "role") whose removal lets that prefix
//     render, else whose value replaced by "" does, else whose removal changes the error; an
//     object value is narrowed the same way into its keys, an array value (tool_calls)
//     to its first element whose array prefix fails, up to 4 levels deep
//     ("messages[2].tool_calls[0].function.arguments"); when no key is to blame, the message's
//     place in the conversation is ("messages[i].role", e.g. a raise_exception on role order).
// Only the error path pays for it: at most kMaxLocateRenders extra renders.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/chat_template.h"

namespace qs {

struct TemplateErrorLocation {
  size_t message_index = 0;
  std::string path;  // "messages[i].<field>[.<sub>|[j]]...", the OpenAI error param
};

inline constexpr int kMaxLocateRenders = 64;

/// `context` is the render context that made `tmpl.render` throw qs::Error with message `error`
/// (its "messages" an array). Returns where the error comes from, or nullopt when the context has
/// no messages, or the error does not follow any message (an empty conversation reproduces it,
/// or no prefix does). Never throws for template errors.
std::optional<TemplateErrorLocation> locate_template_error(const ChatTemplate& tmpl,
                                                           const nlohmann::ordered_json& context,
                                                           const std::string& error);

}  // namespace qs
