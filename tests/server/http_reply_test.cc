// The error shape of every rejected request (OpenAI API reference, "Error codes": a JSON object
// {"error": {"message": string, "type": string, "param": string|null, "code": string|null}}), the
// Retry-After header of 429/503 (RFC 9110 section 10.2.3: delay-seconds = 1*DIGIT) and the
// reading of JSON bodies (415 / 400; media types per RFC 9110 section 8.3).
#include <gtest/gtest.h>

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "server/api_error.h"
#include "server/routes/http_reply.h"
#include "server/routes/media_type.h"

namespace qs {
namespace {

using json = nlohmann::json;

// The documented shape: exactly these four members, with these JSON types.
void expect_openai_error_shape(const json& body) {
  ASSERT_TRUE(body.is_object()) << body;
  ASSERT_EQ(body.size(), 1u) << body;
  ASSERT_TRUE(body.contains("error")) << body;
  const json& e = body["error"];
  ASSERT_TRUE(e.is_object()) << body;
  std::set<std::string> keys;
  for (const auto& [key, value] : e.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"message", "type", "param", "code"})) << body;
  EXPECT_TRUE(e["message"].is_string()) << body;
  EXPECT_FALSE(e["message"].get<std::string>().empty()) << body;
  EXPECT_TRUE(e["type"].is_string()) << body;
  EXPECT_TRUE(e["param"].is_string() || e["param"].is_null()) << body;
  EXPECT_TRUE(e["code"].is_string() || e["code"].is_null()) << body;
}

TEST(HttpReply, ErrorBodyHasOpenAisShapeAndStatus) {
  httplib::Response res;
  send_error(res, ApiError(400, "temperature must be in [0, 2], got 9", "temperature", "invalid_request_error",
                           "invalid_value"));
  EXPECT_EQ(res.status, 400);
  EXPECT_EQ(res.get_header_value("Content-Type"), "application/json");
  const json body = json::parse(res.body);
  expect_openai_error_shape(body);
  EXPECT_EQ(body["error"]["message"], "temperature must be in [0, 2], got 9");
  EXPECT_EQ(body["error"]["param"], "temperature");
  EXPECT_EQ(body["error"]["code"], "invalid_value");
  EXPECT_FALSE(res.has_header("Retry-After")) << "a 400 will fail again: no Retry-After";
}

TEST(HttpReply, MissingParamAndCodeAreJsonNull) {
  httplib::Response res;
  send_error(res, ApiError(500, "boom", "", "server_error"));
  const json body = json::parse(res.body);
  expect_openai_error_shape(body);
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_TRUE(body["error"]["code"].is_null());
}

TEST(HttpReply, OverloadAndUnavailableCarryRetryAfterInSeconds) {
  for (const int status : {429, 503}) {
    httplib::Response res;
    send_error(res, ApiError(status, "retry later", "", "rate_limit_error", "queue_full"));
    EXPECT_EQ(res.status, status);
    const std::string retry = res.get_header_value("Retry-After");
    ASSERT_FALSE(retry.empty()) << status;
    EXPECT_EQ(retry.find_first_not_of("0123456789"), std::string::npos) << "delay-seconds: " << retry;
    expect_openai_error_shape(json::parse(res.body));
  }
}

TEST(HttpReply, InvalidUtf8InAMessageStillGivesValidJson) {
  httplib::Response res;
  send_error(res, ApiError(400, std::string("bad byte \xff here"), "prompt"));
  const json body = json::parse(res.body);  // throws on invalid UTF-8
  expect_openai_error_shape(body);
}

httplib::Request post(std::string body, std::string content_type) {
  httplib::Request req;
  req.method = "POST";
  req.body = std::move(body);
  if (!content_type.empty()) req.set_header("Content-Type", content_type);
  return req;
}

TEST(HttpReply, JsonBodyWithOrWithoutParametersOrTypeIsRead) {
  for (const char* type : {"application/json", "application/json; charset=utf-8", ""}) {
    const nlohmann::ordered_json body = parse_json_body(post(R"({"a": [1, 2]})", type));
    EXPECT_EQ(body["a"][1], 2) << type;
  }
}

// RFC 9110 section 8.3.1: "The type and subtype tokens are case-insensitive", and parameters
// follow a ";" with optional whitespace around it (section 8.3).
TEST(HttpReply, MediaTypeIsMatchedWithoutRegardToCaseOrParameters) {
  for (const char* type : {"APPLICATION/JSON", "Application/Json", "application/JSON; charset=UTF-8",
                           "application/json ; charset=utf-8", " application/json", "application/json;"}) {
    EXPECT_TRUE(is_json_media_type(type)) << type;
    const nlohmann::ordered_json body = parse_json_body(post(R"({"a": 1})", type));
    EXPECT_EQ(body["a"], 1) << type;
  }
}

// A media type is the whole type/subtype token pair, not a prefix of it.
TEST(HttpReply, TypesThatOnlyStartLikeJsonAre415) {
  for (const char* type : {"application/jsonx", "application/json-patch+json", "application/json5",
                           "application/jsonl; charset=utf-8", "application", "application/", "multipart/form-data; boundary=x",
                           "text/json"}) {
    EXPECT_FALSE(is_json_media_type(type)) << type;
    try {
      parse_json_body(post(R"({"a": 1})", type));
      ADD_FAILURE() << "accepted " << type;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 415) << type;  // RFC 9110 section 15.5.16
      EXPECT_EQ(e.code(), "unsupported_media_type") << type;
      expect_openai_error_shape(e.to_json());
    }
  }
}

TEST(HttpReply, OtherContentTypeIs415) {
  try {
    parse_json_body(post(R"({"a": 1})", "text/plain"));
    FAIL() << "text/plain accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 415);  // RFC 9110 section 15.5.16 Unsupported Media Type
    expect_openai_error_shape(e.to_json());
  }
}

// The 415 message quotes the client's Content-Type (it used to echo it raw: any length, control
// bytes included). Reference: the quoted part is a JSON string literal (RFC 8259 section 7) whose
// value is the header read as ISO-8859-1, so nlohmann's parser must give back exactly that text.
TEST(HttpReply, Unsupported415QuotesTheContentTypeBoundedAndEscaped) {
  const std::string type = "text/plain; q=\"x\\y\"\x01\t\x7f\xff";
  const std::string prefix = "Content-Type must be application/json, got ";
  try {
    parse_json_body(post("{}", type));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 415);
    EXPECT_EQ(std::string(e.what()), prefix + R"("text/plain; q=\"x\\y\"\u0001\u0009\u007f\u00ff")");
    std::string latin1_as_utf8;
    for (const char ch : type) {
      const auto c = static_cast<unsigned char>(ch);
      if (c < 0x80) {
        latin1_as_utf8 += ch;
      } else {
        latin1_as_utf8 += static_cast<char>(0xc0 | (c >> 6));
        latin1_as_utf8 += static_cast<char>(0x80 | (c & 0x3f));
      }
    }
    EXPECT_EQ(json::parse(std::string(e.what()).substr(prefix.size())).get<std::string>(), latin1_as_utf8);
  }
  const std::string long_type = "text/" + std::string(10000, 'a');
  try {
    parse_json_body(post("{}", long_type));
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(std::string(e.what()), prefix + '"' + long_type.substr(0, 64) + "\"... (10005 bytes)");
    for (const char ch : std::string(e.what())) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << static_cast<int>(ch);
  }
}

TEST(HttpReply, MalformedJsonIs400) {
  for (const char* body : {"", "{", "{\"a\": }", "[1,]", "nul"}) {
    try {
      parse_json_body(post(body, "application/json"));
      FAIL() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      EXPECT_EQ(e.type(), "invalid_request_error");
      expect_openai_error_shape(e.to_json());
    }
  }
}

}  // namespace
}  // namespace qs
