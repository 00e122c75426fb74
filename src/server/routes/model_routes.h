// GET /v1/models (OpenAI "List models") and GET /v1/models/{model} ("Retrieve model").
#pragma once

#include <httplib.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/http_server.h"

namespace qs {

/// A model object: {"id": name, "object": "model", "created": 0, "owned_by": "qwenserve",
/// "max_model_len": context_tokens} (the last as vLLM).
nlohmann::json model_object(const std::string& name, int64_t context_tokens);

/// GET /v1/models: {"object": "list", "data": [...]} with the served name, then each alias, each
/// name once.
void handle_list_models(const ServerOptions& options, int64_t context_tokens, httplib::Response& res);

/// GET /v1/models/{model}: the model object of `name`. Throws ApiError 404 model_not_found for a
/// name that is neither the served name nor an alias (served_model_for).
void handle_retrieve_model(const std::string& name, const ServerOptions& options, int64_t context_tokens,
                           httplib::Response& res);

}  // namespace qs
