#include "server/routes/health_routes.h"

#include "server/api_error.h"
#include "server/routes/http_reply.h"

namespace qs {

void handle_health(httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); }

void handle_ready(bool accepting, httplib::Response& res) {
  if (!accepting) throw ApiError(503, "model is loading or the server is draining", "", "service_unavailable");
  send_json(res, 200, {{"status", "ready"}});
}

}  // namespace qs
