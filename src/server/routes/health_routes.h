// GET /health (liveness) and GET /ready (readiness).
#pragma once

#include <httplib.h>

namespace qs {

/// GET /health: 200 {"status": "ok"} while the process serves HTTP at all.
void handle_health(httplib::Response& res);

/// GET /ready: 200 {"status": "ready"} when `accepting` (model loaded and warmed up, not
/// draining); else throws ApiError 503 (type service_unavailable).
void handle_ready(bool accepting, httplib::Response& res);

}  // namespace qs
