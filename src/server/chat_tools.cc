#include "server/chat_tools.h"

#include <string>

#include "server/api_error.h"

namespace qs {
namespace {

using json = nlohmann::ordered_json;

// The member `key` of `obj` unless absent or null.
const json* present(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

void validate_function(const json& fn, const std::string& param) {
  if (!fn.is_object()) throw invalid_param(param, param + " must be an object {name, description, parameters}, got " + std::string(fn.type_name()));
  const json* name = present(fn, "name");
  if (name == nullptr) throw invalid_param(param + ".name", param + ".name is required");
  if (!name->is_string() || name->get<std::string>().empty()) {
    throw invalid_param(param + ".name", param + ".name must be a non-empty string, got " + name->dump());
  }
  if (const json* d = present(fn, "description"); d != nullptr && !d->is_string()) {
    throw invalid_param(param + ".description", param + ".description must be a string, got " + std::string(d->type_name()));
  }
  if (const json* p = present(fn, "parameters"); p != nullptr && !p->is_object()) {
    throw invalid_param(param + ".parameters",
                        param + ".parameters must be a JSON Schema object, got " + std::string(p->type_name()));
  }
  if (const json* s = present(fn, "strict"); s != nullptr && !s->is_boolean()) {
    throw invalid_param(param + ".strict", param + ".strict must be a boolean, got " + std::string(s->type_name()));
  }
}

}  // namespace

void validate_chat_tools(const json& tools) {
  if (!tools.is_array()) throw invalid_param("tools", "tools must be an array, got " + std::string(tools.type_name()));
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    const std::string param = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) {
      throw invalid_param(param, param + " must be an object {\"type\": \"function\", \"function\": {...}}, got " +
                                     std::string(tool.type_name()));
    }
    if (const json* type = present(tool, "type"); type != nullptr && *type != "function") {
      throw invalid_param(param + ".type", param + ".type must be \"function\", got " + type->dump());
    }
    const json* fn = present(tool, "function");
    if (fn == nullptr) throw invalid_param(param + ".function", param + ".function is required");
    validate_function(*fn, param + ".function");
  }
}

}  // namespace qs
