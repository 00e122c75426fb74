// GET /health (liveness) and GET /ready (readiness).
#pragma once

#include <httplib.h>

namespace qs {

/// GET /health: 200 {"status": "ok"} while the process serves HTTP at all.
void handle_health(httplib::Response& res);

/// GET /ready: 200 {"status": "ready"} when the model is `loaded` (and warmed up) and the server
/// is not `draining`; else throws ApiError 503, type service_unavailable, code "model_loading"
/// or "server_shutdown" (the code the generation routes' 503s carry while draining).
void handle_ready(bool loaded, bool draining, httplib::Response& res);

}  // namespace qs
