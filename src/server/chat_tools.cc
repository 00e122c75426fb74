#include "server/chat_tools.h"

#include <string>

#include "server/api_error.h"
#include "server/json_field.h"

namespace qs {
namespace {

using json = nlohmann::ordered_json;

using json_field::field;  // the member unless absent or null

void validate_function(const json& fn, const std::string& param) {
  if (!fn.is_object()) throw invalid_param(param, param + " must be an object {name, description, parameters}, got " + std::string(fn.type_name()));
  const json* name = field(fn, "name");
  if (name == nullptr) throw invalid_param(param + ".name", param + ".name is required");
  if (!name->is_string() || name->get<std::string>().empty()) {
    throw invalid_param(param + ".name", param + ".name must be a non-empty string, got " + name->dump());
  }
  if (const json* d = field(fn, "description"); d != nullptr && !d->is_string()) {
    throw invalid_param(param + ".description", param + ".description must be a string, got " + std::string(d->type_name()));
  }
  if (const json* p = field(fn, "parameters"); p != nullptr && !p->is_object()) {
    throw invalid_param(param + ".parameters",
                        param + ".parameters must be a JSON Schema object, got " + std::string(p->type_name()));
  }
  if (const json* s = field(fn, "strict"); s != nullptr && !s->is_boolean()) {
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
    if (const json* type = field(tool, "type"); type != nullptr && *type != "function") {
      throw invalid_param(param + ".type", param + ".type must be \"function\", got " + type->dump());
    }
    const json* fn = field(tool, "function");
    if (fn == nullptr) throw invalid_param(param + ".function", param + ".function is required");
    validate_function(*fn, param + ".function");
  }
}

}  // namespace qs
