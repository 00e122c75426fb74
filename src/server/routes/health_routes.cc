#include "server/routes/health_routes.h"

#include "server/api_error.h"
#include "server/routes/http_reply.h"

namespace qs {

void handle_health(httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); }

void handle_ready(bool loaded, bool draining, httplib::Response& res) {
  if (draining) throw ApiError(503, "the server is shutting down", "", "service_unavailable", "server_shutdown");
  if (!loaded) throw ApiError(503, "the model is loading", "", "service_unavailable", "model_loading");
  send_json(res, 200, {{"status", "ready"}});
}

}  // namespace qs
