#include "server/routes/cors.h"

#include <algorithm>

namespace qs {
namespace {

bool any_origin(const std::vector<std::string>& allowed) {
  return std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
}

bool origin_allowed(const std::string& origin, const std::vector<std::string>& allowed) {
  return !origin.empty() && (any_origin(allowed) || std::find(allowed.begin(), allowed.end(), origin) != allowed.end());
}

void set_allow_origin(const std::string& origin, httplib::Response& res, const std::vector<std::string>& allowed) {
  if (any_origin(allowed)) {
    res.set_header("Access-Control-Allow-Origin", "*");
  } else {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");  // the answer depends on the Origin header (caches)
  }
}

}  // namespace

std::string cors_origin_problem(const std::string& origin) {
  if (origin == "*") return "";
  const size_t sep = origin.find("://");
  const auto bad = [&origin](const std::string& why) { return "'" + origin + "' is not an origin: " + why; };
  if (sep == std::string::npos || sep == 0) return bad("expected scheme://host[:port] or *");
  const std::string scheme = origin.substr(0, sep);
  if (scheme.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+.-") != std::string::npos) {
    return bad("the scheme must be lower case, as browsers send it");
  }
  const std::string authority = origin.substr(sep + 3);
  if (authority.empty()) return bad("no host");
  if (authority.find_first_of("/?#") != std::string::npos) return bad("an origin has no path (nor a trailing '/')");
  if (authority.find_first_of(" \t\r\n,") != std::string::npos) return bad("no spaces or commas");
  return "";
}

bool is_cors_preflight(const httplib::Request& req, const std::vector<std::string>& allowed) {
  return !allowed.empty() && req.method == "OPTIONS" && req.has_header("Origin") &&
         req.has_header("Access-Control-Request-Method");
}

std::optional<ApiError> answer_cors_preflight(const httplib::Request& req, httplib::Response& res,
                                              const std::vector<std::string>& allowed) {
  const std::string origin = req.get_header_value("Origin");
  if (!origin_allowed(origin, allowed)) {
    return ApiError(403, "origin " + origin + " is not allowed (--allowed-origins)", "", "invalid_request_error",
                    "cors_origin_not_allowed");
  }
  res.status = 204;
  set_allow_origin(origin, res, allowed);
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  if (req.has_header("Access-Control-Request-Headers")) {
    res.set_header("Access-Control-Allow-Headers", req.get_header_value("Access-Control-Request-Headers"));
  }
  res.set_header("Access-Control-Max-Age", "600");
  return std::nullopt;
}

void add_cors_headers(const httplib::Request& req, httplib::Response& res, const std::vector<std::string>& allowed) {
  if (allowed.empty() || is_cors_preflight(req, allowed)) return;  // a preflight has its own headers
  const std::string origin = req.get_header_value("Origin");
  if (!origin_allowed(origin, allowed)) return;
  set_allow_origin(origin, res, allowed);
  res.set_header("Access-Control-Expose-Headers", kCorsExposedHeaders);
  // Resource Timing: the serverTiming entries of PerformanceResourceTiming are given to the page
  // only when its origin passes this check (W3C Server Timing, "timing-allow-check").
  res.set_header("Timing-Allow-Origin", any_origin(allowed) ? "*" : origin);
}

}  // namespace qs
