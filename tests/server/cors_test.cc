// CORS per the WHATWG Fetch standard ("CORS protocol"): a preflight (OPTIONS + Origin +
// Access-Control-Request-Method) gets an ok status (2xx) with Access-Control-Allow-Origin matching
// the origin (or "*"), the requested method in Access-Control-Allow-Methods and every requested
// header in Access-Control-Allow-Headers (Authorization must be named: "*" does not cover it);
// the actual response carries Access-Control-Allow-Origin, Vary: Origin when it echoes the origin
// (RFC 9110 section 12.5.5), and exposes non-safelisted headers the client reads (x-request-id,
// Retry-After). Other origins get no Access-Control-Allow-Origin.
#include <gtest/gtest.h>

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "server/routes/cors.h"
#include "server/routes/pre_routing.h"

namespace qs {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The comma-separated tokens of a header value (RFC 9110 section 5.6.1), lower-cased.
std::vector<std::string> tokens(const std::string& value) {
  std::vector<std::string> out;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(lower(item.substr(b, e - b + 1)));
  }
  return out;
}

bool lists(const std::string& value, const std::string& token) {
  const std::vector<std::string> t = tokens(value);
  return std::find(t.begin(), t.end(), lower(token)) != t.end();
}

httplib::Request preflight(const std::string& origin, const std::string& method, const std::string& headers) {
  httplib::Request req;
  req.method = "OPTIONS";
  req.path = "/v1/chat/completions";
  req.set_header("Origin", origin);
  req.set_header("Access-Control-Request-Method", method);
  if (!headers.empty()) req.set_header("Access-Control-Request-Headers", headers);
  return req;
}

const std::vector<std::string> kAllowed = {"http://localhost:3000", "https://app.example.com"};

TEST(Cors, PreflightFromAnAllowedOriginIsAnsweredForItsMethodAndHeaders) {
  const httplib::Request req = preflight("https://app.example.com", "POST", "authorization,content-type");
  ASSERT_TRUE(is_cors_preflight(req, kAllowed));
  httplib::Response res;
  EXPECT_FALSE(answer_cors_preflight(req, res, kAllowed));
  EXPECT_GE(res.status, 200);
  EXPECT_LT(res.status, 300) << "a preflight needs an ok status";
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "https://app.example.com");
  EXPECT_TRUE(lists(res.get_header_value("Vary"), "Origin"));
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Allow-Methods"), "POST"));
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Allow-Headers"), "Authorization"));
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Allow-Headers"), "Content-Type"));
  const std::string max_age = res.get_header_value("Access-Control-Max-Age");
  EXPECT_FALSE(max_age.empty());
  EXPECT_EQ(max_age.find_first_not_of("0123456789"), std::string::npos) << "delta-seconds: " << max_age;
}

TEST(Cors, PreflightFromAnotherOriginIsRefused) {
  const httplib::Request req = preflight("https://evil.example", "POST", "authorization");
  httplib::Response res;
  const std::optional<ApiError> refused = answer_cors_preflight(req, res, kAllowed);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status(), 403);
  EXPECT_FALSE(res.has_header("Access-Control-Allow-Origin"));
  // Origins compare as whole serializations: scheme, host and port.
  for (const char* near : {"http://app.example.com", "https://app.example.com:8443", "http://localhost:3001"}) {
    httplib::Response r;
    EXPECT_TRUE(answer_cors_preflight(preflight(near, "POST", ""), r, kAllowed)) << near;
  }
}

TEST(Cors, WildcardAllowsAnyOriginWithStar) {
  const std::vector<std::string> any = {"*"};
  httplib::Response res;
  EXPECT_FALSE(answer_cors_preflight(preflight("https://anything.test", "GET", "authorization"), res, any));
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Allow-Headers"), "authorization"))
      << "the '*' wildcard does not cover Authorization: it is named";
}

TEST(Cors, ActualResponsesToAllowedOriginsCarryAllowOriginAndExposeHeaders) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.set_header("Origin", "http://localhost:3000");
  httplib::Response res;
  res.status = 429;  // errors too: the page must be able to read why
  add_cors_headers(req, res, kAllowed);
  EXPECT_EQ(res.get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_TRUE(lists(res.get_header_value("Vary"), "Origin"));
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Expose-Headers"), "x-request-id"));
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Expose-Headers"), "request-id"));  // Anthropic's SDKs
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Expose-Headers"), "Retry-After"));
  // The latency breakdown (issue 12) is readable by a browser client.
  EXPECT_TRUE(lists(res.get_header_value("Access-Control-Expose-Headers"), "Server-Timing"));
  EXPECT_EQ(res.get_header_value("Timing-Allow-Origin"), "http://localhost:3000");

  req.headers.erase("Origin");
  req.set_header("Origin", "https://evil.example");
  httplib::Response other;
  add_cors_headers(req, other, kAllowed);
  EXPECT_FALSE(other.has_header("Access-Control-Allow-Origin"));

  req.headers.erase("Origin");
  httplib::Response same_origin;
  add_cors_headers(req, same_origin, kAllowed);
  EXPECT_FALSE(same_origin.has_header("Access-Control-Allow-Origin")) << "no Origin: not a CORS request";
}

TEST(Cors, OffByDefault) {
  const httplib::Request req = preflight("http://localhost:3000", "POST", "");
  EXPECT_FALSE(is_cors_preflight(req, {})) << "without --allowed-origins OPTIONS is routed as before";
  httplib::Request post;
  post.method = "POST";
  post.set_header("Origin", "http://localhost:3000");
  httplib::Response res;
  add_cors_headers(post, res, {});
  EXPECT_TRUE(res.headers.empty());
}

TEST(Cors, PreflightNeedsNoApiKeyButTheActualRequestDoes) {
  ServerOptions options;
  options.api_key = "sekret";
  options.allowed_origins = kAllowed;
  EXPECT_FALSE(check_request_headers(preflight("http://localhost:3000", "POST", "authorization"), options));
  httplib::Request post;
  post.method = "POST";
  post.path = "/v1/chat/completions";
  post.set_header("Origin", "http://localhost:3000");
  post.set_header("Content-Length", "2");
  const auto rejection = check_request_headers(post, options);
  ASSERT_TRUE(rejection);
  EXPECT_EQ(rejection->error.status(), 401);
}

TEST(Cors, AllowedOriginsAreSerializedOriginsOrStar) {
  for (const char* ok : {"*", "http://localhost:3000", "https://app.example.com", "http://[::1]:8080"}) {
    EXPECT_EQ(cors_origin_problem(ok), "") << ok;
  }
  for (const char* bad : {"", "localhost:3000", "https://app.example.com/", "https://a.example/path", "HTTPS://a.example",
                          "https://", "https://a.example, https://b.example"}) {
    EXPECT_NE(cors_origin_problem(bad), "") << bad;
  }
}

}  // namespace
}  // namespace qs
