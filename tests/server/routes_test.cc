// The route handlers called without a socket: a request struct in, the response struct out.
// /v1/models follows the OpenAI "List models" / "Retrieve model" objects; /tokenize and
// /detokenize agree with the Hugging Face tokenizer's ids (tests/fixtures/tokenizer); /metrics is
// Prometheus text format 0.0.4; unrouted requests get OpenAI-shaped errors or a static file.
#include <gtest/gtest.h>

#include <tuple>

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"
#include "metrics/server_metrics.h"
#include "server/api_error.h"
#include "server/routes/fallback_route.h"
#include "server/routes/generation_routes.h"
#include "server/routes/health_routes.h"
#include "server/routes/metrics_routes.h"
#include "server/routes/model_routes.h"
#include "server/routes/route_methods.h"
#include "server/routes/tokenize_routes.h"
#include "support/tokenizer_test_support.h"

namespace qs {
namespace {

using json = nlohmann::json;

httplib::Request post_json(const json& body) {
  httplib::Request req;
  req.method = "POST";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  return req;
}

json json_body(const httplib::Response& res) {
  EXPECT_EQ(res.get_header_value("Content-Type"), "application/json");
  return json::parse(res.body);
}

// Throws ApiError or returns; the status and param of the error.
template <typename F>
ApiError caught(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no ApiError thrown";
  return ApiError(0, "none");
}

TEST(Routes, ClientRequestIdIsKeptOnlyWhenShortAndVisibleAscii) {
  const auto with = [](const std::string& value) {
    httplib::Request req;
    req.headers.emplace("X-Request-Id", value);
    return client_request_id(req);
  };
  EXPECT_EQ(client_request_id(httplib::Request()), "");
  EXPECT_EQ(with("trace-7f3a:span.9_Z"), "trace-7f3a:span.9_Z");
  EXPECT_EQ(with(std::string(128, 'a')), std::string(128, 'a'));
  EXPECT_EQ(with(std::string(129, 'a')), "") << "longer than 128 bytes: ignored";
  EXPECT_EQ(with("has space"), "") << "0x20 is not visible";
  EXPECT_EQ(with("tab\there"), "");
  EXPECT_EQ(with("caf\xc3\xa9"), "") << "non-ASCII";
  EXPECT_EQ(with("del\x7f"), "");
  httplib::Request lower;  // HTTP header names are case-insensitive (RFC 9110 5.1)
  lower.headers.emplace("x-request-id", "abc");
  EXPECT_EQ(client_request_id(lower), "abc");
}

TEST(Routes, HealthIsAlways200) {
  httplib::Response res;
  handle_health(res);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(json_body(res)["status"], "ok");
}

TEST(Routes, ReadyIs200OnlyWhenLoadedAndNotDraining) {
  httplib::Response res;
  handle_ready(true, false, res);
  EXPECT_EQ(res.status, 200);
  // A 503 with a code saying which (an orchestrator or a person reading it tells them apart).
  for (const auto& [is_loaded, is_draining, code] : {std::tuple{false, false, "model_loading"},
                                                     std::tuple{true, true, "server_shutdown"},
                                                     std::tuple{false, true, "server_shutdown"}}) {
    const bool loaded = is_loaded, draining = is_draining;  // clang 14 cannot capture bindings
    const ApiError e = caught([loaded, draining] {
      httplib::Response r;
      handle_ready(loaded, draining, r);
    });
    EXPECT_EQ(e.status(), 503);
    EXPECT_EQ(e.type(), "service_unavailable");
    EXPECT_EQ(e.code(), code);
  }
}

// OpenAI's model object: id (string), object "model", created (integer), owned_by (string).
void expect_model_object(const json& m, const std::string& id) {
  EXPECT_EQ(m["id"], id);
  EXPECT_EQ(m["object"], "model");
  EXPECT_TRUE(m["created"].is_number_integer()) << m;
  EXPECT_EQ(m["created"], 1764662400) << m;  // the time the server passed in
  EXPECT_TRUE(m["owned_by"].is_string()) << m;
}

TEST(Routes, ModelListHasEachServedNameOnce) {
  ServerOptions options;
  options.served_model_name = "main";
  options.served_model_aliases = {"alias", "main", "alias"};
  httplib::Response res;
  handle_list_models(options, 4096, 1764662400, res);
  EXPECT_EQ(res.status, 200);
  const json body = json_body(res);
  EXPECT_EQ(body["object"], "list");
  ASSERT_TRUE(body["data"].is_array());
  ASSERT_EQ(body["data"].size(), 2u) << body;
  expect_model_object(body["data"][0], "main");
  expect_model_object(body["data"][1], "alias");
}

TEST(Routes, RetrieveModelReturnsTheObjectOr404) {
  ServerOptions options;
  options.served_model_name = "main";
  options.served_model_aliases = {"alias"};
  httplib::Response res;
  handle_retrieve_model("alias", options, 4096, 1764662400, res);
  EXPECT_EQ(res.status, 200);
  expect_model_object(json_body(res), "alias");
  const ApiError e = caught([&] {
    httplib::Response r;
    handle_retrieve_model("gpt-4", options, 4096, 1764662400, r);
  });
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(e.param(), "model");
  EXPECT_EQ(e.code(), "model_not_found");
}

// A ChatML template written out here, so that the expected prompt text is known independently.
const char* kChatMl =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

struct TokenizeFixture {
  ServerOptions options;
  ChatTemplate chat_template{kChatMl};
  JobContext ctx{options, test::qwen_tokenizer(), chat_template, 4096, 0};
};

TEST(Routes, TokenizeAPromptGivesTheReferenceIds) {
  TokenizeFixture f;
  for (const test::CorpusCase& c : test::corpus_cases()) {
    if (c.text.empty()) continue;
    httplib::Response res;
    handle_tokenize(post_json({{"prompt", c.text}}), f.ctx, res);
    ASSERT_EQ(res.status, 200) << c.tag;
    const json body = json_body(res);
    EXPECT_EQ(body["tokens"].get<std::vector<int32_t>>(), c.ids) << c.tag;
    EXPECT_EQ(body["count"], c.ids.size()) << c.tag;
    EXPECT_EQ(body["max_model_len"], 4096);
  }
}

TEST(Routes, TokenizeMessagesRendersTheChatTemplate) {
  TokenizeFixture f;
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const Tokenizer& tok = test::qwen_tokenizer();
  httplib::Response with_prompt;
  handle_tokenize(post_json({{"messages", messages}}), f.ctx, with_prompt);
  EXPECT_EQ(json_body(with_prompt)["tokens"].get<std::vector<int32_t>>(),
            tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"))
      << "add_generation_prompt defaults to true";
  httplib::Response without;
  handle_tokenize(post_json({{"messages", messages}, {"add_generation_prompt", false}}), f.ctx, without);
  EXPECT_EQ(json_body(without)["tokens"].get<std::vector<int32_t>>(), tok.encode("<|im_start|>user\nHi<|im_end|>\n"));
}

TEST(Routes, TokenizeContinueFinalMessageLeavesTheLastMessageOpen) {
  TokenizeFixture f;
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Once upon"}}});
  httplib::Response res;
  handle_tokenize(post_json({{"messages", messages}, {"add_generation_prompt", false}, {"continue_final_message", true}}),
                  f.ctx, res);
  EXPECT_EQ(json_body(res)["tokens"].get<std::vector<int32_t>>(),
            test::qwen_tokenizer().encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon"));
}

TEST(Routes, TokenizeWithAWrongTypedTemplateFieldIs400NamingIt) {
  TokenizeFixture f;
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  for (const auto& entry : {std::pair<std::string, json>{"add_generation_prompt", "yes"},
                            std::pair<std::string, json>{"add_generation_prompt", 1},
                            std::pair<std::string, json>{"continue_final_message", "no"},
                            std::pair<std::string, json>{"chat_template_kwargs", json::array()}}) {
    const std::string& field = entry.first;  // a lambda cannot capture a structured binding in clang 14
    const json& value = entry.second;
    const ApiError e = caught([&] {
      httplib::Response res;
      handle_tokenize(post_json({{"messages", messages}, {field, value}}), f.ctx, res);
    });
    EXPECT_EQ(e.status(), 400) << field << "=" << value;
    EXPECT_EQ(e.param(), field);
  }
}

TEST(Routes, TokenizeWithoutPromptOrMessagesIs400) {
  TokenizeFixture f;
  for (const json& body : {json::object(), json{{"prompt", 5}}, json{{"text", "hi"}}}) {
    const ApiError e = caught([&] {
      httplib::Response res;
      handle_tokenize(post_json(body), f.ctx, res);
    });
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.param(), "prompt") << body;
  }
}

TEST(Routes, DetokenizeGivesTheReferenceText) {
  for (const test::CorpusCase& c : test::corpus_cases()) {
    httplib::Response res;
    handle_detokenize(post_json({{"tokens", c.ids}}), test::qwen_tokenizer(), res);
    ASSERT_EQ(res.status, 200) << c.tag;
    EXPECT_EQ(json_body(res)["prompt"], c.decoded) << c.tag;
  }
}

TEST(Routes, DetokenizeRejectsWhatIsNotAListOfTokenIds) {
  const int32_t vocab = test::qwen_tokenizer().vocab_size();
  for (const json& body : {json::object(), json{{"tokens", "9707"}}, json{{"tokens", {9707, "11"}}},
                           json{{"tokens", {-1}}}, json{{"tokens", {vocab}}}, json{{"tokens", {1.5}}}}) {
    const ApiError e = caught([&] {
      httplib::Response res;
      handle_detokenize(post_json(body), test::qwen_tokenizer(), res);
    });
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.param(), "tokens") << body;
  }
}

// The value of an unlabelled sample line `name value` in Prometheus text format.
double sample(const std::string& text, const std::string& name) {
  const std::string prefix = "\n" + name + " ";
  const size_t at = ("\n" + text).find(prefix);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no sample " << name;
    return -1;
  }
  return std::stod(text.substr(at + prefix.size() - 1));
}

TEST(Routes, MetricsIsPrometheusTextWithTheEngineGauges) {
  metrics::ServerMetrics metrics;
  EngineStats stats;
  stats.running = 3;
  stats.waiting = 7;
  stats.kv_cache_usage = 0.25;
  httplib::Response res;
  handle_metrics(stats, metrics, res);
  EXPECT_EQ(res.status == -1 ? 200 : res.status, 200);
  EXPECT_EQ(res.get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u)
      << res.get_header_value("Content-Type");
  EXPECT_EQ(sample(res.body, "qwenserve_num_requests_running"), 3);
  EXPECT_EQ(sample(res.body, "qwenserve_num_requests_waiting"), 7);
  EXPECT_EQ(sample(res.body, "qwenserve_kv_cache_usage_perc"), 0.25);
}

TEST(Routes, StatsReportsKvBlocksAndPreemptions) {
  metrics::ServerMetrics metrics;
  EngineStats stats;
  stats.kv_blocks_total = 100;
  stats.kv_blocks_referenced = 40;
  stats.kv_blocks_cached = 12;
  stats.preemptions_total = 5;
  httplib::Response res;
  handle_stats(stats, metrics, res);
  EXPECT_EQ(res.status, 200);
  const json body = json_body(res);
  EXPECT_EQ(body["kv_blocks"], (json{{"total", 100}, {"referenced", 40}, {"cached", 12}}));
  EXPECT_EQ(body["preemptions"], 5);
}

TEST(Routes, UnroutedRequestsGetAnOpenAiErrorOrAStaticFile) {
  static const StaticFile page{"text/html", "<html></html>"};
  const StaticFileLookup files = [](std::string_view path) { return path == "/" ? &page : nullptr; };
  httplib::Request get;
  get.method = "GET";
  get.path = "/";
  httplib::Response served;
  served.status = 404;
  EXPECT_FALSE(fallback_reply(get, served, files, 100));
  EXPECT_EQ(served.status, 200);
  EXPECT_EQ(served.body, "<html></html>");
  EXPECT_EQ(served.get_header_value("Content-Type"), "text/html");

  get.path = "/nope";
  httplib::Response missing;
  missing.status = 404;
  const std::optional<ApiError> not_found = fallback_reply(get, missing, files, 100);
  ASSERT_TRUE(not_found);
  EXPECT_EQ(not_found->status(), 404);
  EXPECT_NE(std::string(not_found->what()).find("/nope"), std::string::npos);
  EXPECT_EQ(not_found->type(), "invalid_request_error");  // OpenAI's type for an unknown URL

  httplib::Request post;
  post.method = "POST";
  post.path = "/";
  httplib::Response too_large;
  too_large.status = 413;
  const std::optional<ApiError> large = fallback_reply(post, too_large, files, 100);
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status(), 413);
  EXPECT_EQ(large->code(), "request_too_large");
}

// httplib answers a head it cannot parse with a bare 400. RFC 9110 section 9.1: a method the
// server does not implement is a 501; anything else unparsable is a 400; both close.
TEST(Routes, UnparsableHeadsAre400AndUnknownMethods501BothClosing) {
  httplib::Request foo;
  foo.method = "FOO";
  foo.version = "HTTP/1.1";
  httplib::Response res;
  res.status = 400;
  const std::optional<ApiError> not_implemented = fallback_reply(foo, res, nullptr, 100);
  ASSERT_TRUE(not_implemented);
  EXPECT_EQ(not_implemented->status(), 501);
  EXPECT_EQ(res.status, 501);
  EXPECT_EQ(res.get_header_value("Connection"), "close");
  for (const char* method : {"TRACE", "CONNECT"}) {  // standard methods no route here takes
    httplib::Request req;
    req.method = method;
    req.version = "HTTP/1.1";
    httplib::Response r;
    r.status = 400;
    const std::optional<ApiError> error = fallback_reply(req, r, nullptr, 100);
    ASSERT_TRUE(error) << method;
    EXPECT_EQ(error->status(), 501) << method;
  }
  for (const auto& [method, version] : std::vector<std::pair<std::string, std::string>>{
           {"", ""}, {"G(T", "HTTP/1.1"}, {"GET", "HTTP/2.0"}, {"FOO", "HTTP/9"}}) {
    httplib::Request req;
    req.method = method;
    req.version = version;
    httplib::Response r;
    r.status = 400;
    const std::optional<ApiError> error = fallback_reply(req, r, nullptr, 100);
    ASSERT_TRUE(error) << method;
    EXPECT_EQ(error->status(), 400) << method;
    EXPECT_EQ(error->code(), "malformed_request") << method;
    EXPECT_EQ(r.get_header_value("Connection"), "close") << method;
  }
}

// RFC 9110 section 15.5.6: a method the target resource does not support is 405, and the
// response carries an Allow header (section 10.2.1) listing the methods it does support; a path
// that is no resource at all stays 404.
TEST(Routes, KnownPathWithAnotherMethodIs405ListingTheAllowedMethods) {
  RouteMethods routes;
  routes.add("GET", "/health");
  routes.add("POST", "/v1/chat/completions");
  routes.add("GET", "/v1/models");
  routes.add("GET", R"(/v1/models/(.+))");
  struct Case {
    const char* method;
    const char* path;
    const char* allow;
  };
  for (const Case& c : {Case{"GET", "/v1/chat/completions", "POST"}, Case{"POST", "/health", "GET, HEAD"},
                        Case{"DELETE", "/v1/models", "GET, HEAD"}, Case{"DELETE", "/v1/models/qwenserve", "GET, HEAD"}}) {
    httplib::Request req;
    req.method = c.method;
    req.path = c.path;
    httplib::Response res;
    res.status = 404;  // httplib found no handler for this method
    const std::optional<ApiError> error = fallback_reply(req, res, nullptr, 100, routes);
    ASSERT_TRUE(error) << c.method << " " << c.path;
    EXPECT_EQ(error->status(), 405) << c.method << " " << c.path;
    EXPECT_EQ(res.status, 405);
    EXPECT_EQ(res.get_header_value("Allow"), c.allow) << c.method << " " << c.path;
    EXPECT_EQ(error->code(), "method_not_allowed");
  }
  httplib::Request unknown;
  unknown.method = "DELETE";
  unknown.path = "/v1/nothing";
  httplib::Response res;
  res.status = 404;
  const std::optional<ApiError> not_found = fallback_reply(unknown, res, nullptr, 100, routes);
  ASSERT_TRUE(not_found);
  EXPECT_EQ(not_found->status(), 404);
  EXPECT_FALSE(res.has_header("Allow"));
}

// httplib parses a multipart/form-data body before routing and answered a JSON body sent with
// that type with a bare 400 "HTTP error 400", code null. The routes take application/json only,
// so the answer is 415 Unsupported Media Type (RFC 9110 section 15.5.16), code unsupported_media_type.
TEST(Routes, UnparsableMultipartBodyIs415LikeAnyOtherNonJsonType) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.set_header("Content-Type", "multipart/form-data; boundary=x");
  httplib::Response res;
  res.status = 400;  // what httplib sets when the multipart body does not parse
  const std::optional<ApiError> error = fallback_reply(req, res, nullptr, 100);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->status(), 415);
  EXPECT_EQ(res.status, 415);
  EXPECT_EQ(error->code(), "unsupported_media_type");
  // Any other 400 httplib gives stays a 400.
  httplib::Request plain;
  plain.method = "POST";
  plain.path = "/v1/chat/completions";
  httplib::Response bad;
  bad.status = 400;
  const std::optional<ApiError> other = fallback_reply(plain, bad, nullptr, 100);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status(), 400);
}

TEST(Routes, RouteMethodsMatchWholePathsAndListEachMethodOnce) {
  RouteMethods routes;
  routes.add("GET", "/v1/models");
  routes.add("GET", R"(/v1/models/(.+))");
  routes.add("POST", "/v1/models");
  EXPECT_EQ(routes.allowed("/v1/models"), (std::vector<std::string>{"GET", "HEAD", "POST"}));
  EXPECT_TRUE(routes.allowed("/v1/models/").empty()) << "(.+) needs a model name";
  EXPECT_TRUE(routes.allowed("/v1/modelsx").empty());
  EXPECT_TRUE(routes.allowed("/x/v1/models").empty());
  EXPECT_EQ(allow_header_value({"GET", "HEAD"}), "GET, HEAD");
}

}  // namespace
}  // namespace qs
