// GET /v1/models (OpenAI "List models") and GET /v1/models/{model} ("Retrieve model").
#pragma once

#include <httplib.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/http_server.h"

namespace qs {

/// A model object: {"id": name, "object": "model", "created": created_unix_s, "owned_by":
/// "qwenserve", "max_model_len": context_tokens} (the last as vLLM). `created_unix_s`: when the
/// server loaded the model (Unix seconds), as llama-server and vLLM report a time of their own.
nlohmann::json model_object(const std::string& name, int64_t context_tokens, int64_t created_unix_s);

/// GET /v1/models: {"object": "list", "data": [...]} with the served name, then each alias, each
/// name once.
void handle_list_models(const ServerOptions& options, int64_t context_tokens, int64_t created_unix_s,
                        httplib::Response& res);

/// GET /v1/models/{model}: the model object of `name`. Throws ApiError 404 model_not_found for a
/// name that is neither the served name nor an alias (served_model_for).
void handle_retrieve_model(const std::string& name, const ServerOptions& options, int64_t context_tokens,
                           int64_t created_unix_s, httplib::Response& res);

}  // namespace qs
