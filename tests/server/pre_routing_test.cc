// Header checks before routing: RFC 9112 section 6.3 (Content-Length = 1*DIGIT; differing values
// are unrecoverable), RFC 9110 sections 15.5.12 (411 Length Required) and 15.5.14 (413 Content
// Too Large), and the OpenAI API's bearer authentication (401, code invalid_api_key).
#include <gtest/gtest.h>

#include <httplib.h>

#include <string>
#include <vector>

#include "server/routes/pre_routing.h"

namespace qs {
namespace {

httplib::Request request(const std::string& method, const std::string& path,
                         const std::vector<std::pair<std::string, std::string>>& headers) {
  httplib::Request req;
  req.method = method;
  req.path = path;
  for (const auto& [k, v] : headers) req.headers.emplace(k, v);
  return req;
}

ServerOptions options_with_limit(size_t max_body_bytes) {
  ServerOptions options;
  options.max_body_bytes = max_body_bytes;
  return options;
}

TEST(PreRouting, ValidRequestsAreRouted) {
  const ServerOptions options = options_with_limit(100);
  EXPECT_FALSE(check_request_headers(request("GET", "/health", {}), options));
  EXPECT_FALSE(check_request_headers(request("POST", "/v1/completions", {{"Content-Length", "100"}}), options));
  EXPECT_FALSE(check_request_headers(request("POST", "/v1/completions", {{"Content-Length", "0"}}), options));
  EXPECT_FALSE(check_request_headers(request("POST", "/v1/completions", {{"Transfer-Encoding", "chunked"}}), options));
  EXPECT_FALSE(check_request_headers(request("POST", "/tokenize", {{"Content-Length", "7"}, {"Content-Length", "7"}}), options))
      << "repeated identical values are allowed";
}

TEST(PreRouting, ContentLengthThatIsNotOneDecimalNumberIs400AndCloses) {
  const ServerOptions options = options_with_limit(1000);
  for (const std::vector<std::pair<std::string, std::string>>& headers :
       std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"Content-Length", "-5"}}, {{"Content-Length", "+5"}}, {{"Content-Length", "5, 5"}},
           {{"Content-Length", ""}}, {{"Content-Length", "0x10"}}, {{"Content-Length", "5.0"}},
           {{"Content-Length", "99999999999999999999999"}}, {{"Content-Length", "5"}, {"Content-Length", "6"}}}) {
    const auto rejection = check_request_headers(request("POST", "/v1/completions", headers), options);
    ASSERT_TRUE(rejection) << headers.back().second;
    EXPECT_EQ(rejection->error.status(), 400) << headers.back().second;
    EXPECT_TRUE(rejection->close_connection) << "the body cannot be delimited";
    EXPECT_NE(std::string(rejection->error.what()).find("Content-Length"), std::string::npos);
  }
}

TEST(PreRouting, DeclaredLengthAboveTheLimitIs413AndCloses) {
  const ServerOptions options = options_with_limit(100);
  EXPECT_FALSE(check_request_headers(request("POST", "/v1/completions", {{"Content-Length", "100"}}), options));
  const auto rejection = check_request_headers(request("POST", "/v1/completions", {{"Content-Length", "101"}}), options);
  ASSERT_TRUE(rejection);
  EXPECT_EQ(rejection->error.status(), 413);
  EXPECT_TRUE(rejection->close_connection);
}

// RFC 9112 section 6.1: Content-Length and Transfer-Encoding together may be rejected, and the
// connection must be closed after the response either way.
TEST(PreRouting, ContentLengthWithTransferEncodingIs400AndCloses) {
  const ServerOptions options = options_with_limit(1000);
  for (const std::string te : {"chunked", "gzip, chunked", "identity"}) {
    const auto rejection =
        check_request_headers(request("POST", "/v1/completions", {{"Content-Length", "2"}, {"Transfer-Encoding", te}}), options);
    ASSERT_TRUE(rejection) << te;
    EXPECT_EQ(rejection->error.status(), 400) << te;
    EXPECT_TRUE(rejection->close_connection) << te;
  }
}

TEST(PreRouting, PostWithoutLengthOrChunkingIs411AndCloses) {
  const auto rejection = check_request_headers(request("POST", "/v1/chat/completions", {}), ServerOptions{});
  ASSERT_TRUE(rejection);
  EXPECT_EQ(rejection->error.status(), 411);
  EXPECT_TRUE(rejection->close_connection);
}

// RFC 9112 section 6.1: chunked is applied at most once; RFC 9110 section 5.3: repeated
// Transfer-Encoding lines are one list, so two "chunked" lines are "chunked, chunked".
TEST(PreRouting, ChunkedTwiceOnOneLineOrTwoIs400AndCloses) {
  const ServerOptions options = options_with_limit(1000);
  for (const std::vector<std::pair<std::string, std::string>>& headers :
       std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"Transfer-Encoding", "chunked, chunked"}},
           {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "Chunked"}}}) {
    EXPECT_FALSE(has_chunked_body(request("POST", "/v1/completions", headers)));
    const auto rejection = check_request_headers(request("POST", "/v1/completions", headers), options);
    ASSERT_TRUE(rejection) << headers.size();
    EXPECT_EQ(rejection->error.status(), 400) << headers.size();
    EXPECT_EQ(rejection->error.code(), "invalid_transfer_encoding");
    EXPECT_TRUE(rejection->close_connection);
  }
  // A coding on a second line is still another coding: 501.
  const auto gzip = check_request_headers(
      request("POST", "/v1/completions", {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "gzip"}}), options);
  ASSERT_TRUE(gzip);
  EXPECT_EQ(gzip->error.status(), 501);
}

TEST(PreRouting, ConflictingContentLengthsNameBothValues) {
  const auto rejection = check_request_headers(
      request("POST", "/v1/completions", {{"Content-Length", "59"}, {"Content-Length", "3"}}), options_with_limit(1000));
  ASSERT_TRUE(rejection);
  EXPECT_EQ(rejection->error.status(), 400);
  const std::string message = rejection->error.what();
  EXPECT_NE(message.find("'59'"), std::string::npos) << message;
  EXPECT_NE(message.find("'3'"), std::string::npos) << message;
  EXPECT_NE(message.find("conflicting"), std::string::npos) << message;
}

// RFC 9112 section 7: transfer-coding names are case-insensitive; section 6.1: a coding the server
// does not understand is a 501.
TEST(PreRouting, ChunkedInAnyCaseIsRoutedOtherTransferCodingsAre501AndClose) {
  const ServerOptions options = options_with_limit(1000);
  for (const char* te : {"chunked", "Chunked", "CHUNKED", " chunked ", "chunked, "}) {  // empty elements ignored
    EXPECT_TRUE(has_chunked_body(request("POST", "/v1/completions", {{"Transfer-Encoding", te}}))) << te;
    EXPECT_FALSE(check_request_headers(request("POST", "/v1/completions", {{"Transfer-Encoding", te}}), options)) << te;
  }
  for (const char* te : {"gzip, chunked", "identity", "gzip", ""}) {
    const auto rejection = check_request_headers(request("POST", "/v1/completions", {{"Transfer-Encoding", te}}), options);
    ASSERT_TRUE(rejection) << te;
    EXPECT_EQ(rejection->error.status(), 501) << te;
    EXPECT_EQ(rejection->error.code(), "unsupported_transfer_encoding") << te;
    EXPECT_TRUE(rejection->close_connection) << te;
  }
}

// cpp-httplib reads a body until the client closes for these methods when nothing frames it.
TEST(PreRouting, BodyReadUntilCloseIsTheUnframedBodyMethods) {
  for (const char* m : {"POST", "PUT", "PATCH", "DELETE"}) {
    EXPECT_TRUE(body_read_until_close(request(m, "/x", {}))) << m;
    EXPECT_FALSE(body_read_until_close(request(m, "/x", {{"Content-Length", "0"}}))) << m;
    EXPECT_FALSE(body_read_until_close(request(m, "/x", {{"Transfer-Encoding", "chunked"}}))) << m;
  }
  for (const char* m : {"GET", "HEAD", "OPTIONS"}) EXPECT_FALSE(body_read_until_close(request(m, "/x", {}))) << m;
}

TEST(PreRouting, ApiKeyGuardsV1RoutesOnly) {
  ServerOptions options;
  options.api_key = "sekret";
  const auto missing = check_request_headers(request("GET", "/v1/models", {}), options);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->error.status(), 401);
  EXPECT_EQ(missing->error.code(), "invalid_api_key");
  EXPECT_FALSE(missing->close_connection) << "headers were fine: the connection can be reused";
  const auto wrong = check_request_headers(request("GET", "/v1/models", {{"Authorization", "Bearer other"}}), options);
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->error.status(), 401);
  EXPECT_FALSE(check_request_headers(request("GET", "/v1/models", {{"Authorization", "Bearer sekret"}}), options));
  EXPECT_FALSE(check_request_headers(request("GET", "/health", {}), options)) << "probes need no key";
  EXPECT_FALSE(check_request_headers(request("GET", "/metrics", {}), options));
}

// RFC 9110 section 11.1: the auth scheme is case-insensitive; the token is not.
TEST(PreRouting, BearerSchemeInAnyCase) {
  ServerOptions options;
  options.api_key = "sekret";
  for (const char* auth : {"bearer sekret", "BEARER sekret", "BeArEr sekret"}) {
    EXPECT_FALSE(check_request_headers(request("GET", "/v1/models", {{"Authorization", auth}}), options)) << auth;
  }
  for (const char* auth : {"Bearer SEKRET", "Bearer sekret ", "Bearersekret", "Basic sekret", "Bearer"}) {
    const auto r = check_request_headers(request("GET", "/v1/models", {{"Authorization", auth}}), options);
    ASSERT_TRUE(r) << auth;
    EXPECT_EQ(r->error.status(), 401) << auth;
  }
}

// RFC 9110 section 15.5.16: 415 for a content coding the server does not accept; a compressed
// body is refused before it is read (inflating it first would bypass --max-body-bytes).
TEST(PreRouting, CompressedBodiesAre415AndClose) {
  const ServerOptions options = options_with_limit(100);
  for (const char* coding : {"gzip", "deflate", "br", " GZIP ", "gzip, identity"}) {
    const auto r = check_request_headers(
        request("POST", "/v1/chat/completions", {{"Content-Length", "50"}, {"Content-Encoding", coding}}), options);
    ASSERT_TRUE(r) << coding;
    EXPECT_EQ(r->error.status(), 415) << coding;
    EXPECT_EQ(r->error.code(), "unsupported_content_encoding");
    EXPECT_TRUE(r->close_connection) << "the body is left unread";
  }
  EXPECT_FALSE(check_request_headers(
      request("POST", "/v1/chat/completions", {{"Content-Length", "50"}, {"Content-Encoding", "identity"}}), options));
  EXPECT_FALSE(check_request_headers(
      request("POST", "/v1/chat/completions", {{"Content-Length", "50"}, {"Content-Encoding", "Identity "}}), options));
}

// Anthropic's SDKs authenticate with "x-api-key: <key>" instead of a bearer token.
TEST(PreRouting, XApiKeyIsAcceptedLikeTheBearerKey) {
  ServerOptions options;
  options.api_key = "sekret";
  EXPECT_FALSE(check_request_headers(request("POST", "/v1/messages", {{"Content-Length", "2"}, {"x-api-key", "sekret"}}), options));
  const auto wrong = check_request_headers(request("POST", "/v1/messages", {{"Content-Length", "2"}, {"x-api-key", "other"}}), options);
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->error.status(), 401);
}

}  // namespace
}  // namespace qs
