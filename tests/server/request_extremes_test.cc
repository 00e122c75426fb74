// Extreme request bodies (issue 16): deep JSON in every field the server walks, very long strings
// and huge counts. Each gets a 400 or is served; none may take the process down. Before
// parse_json_limited limited the depth, a 2 MB body nesting 1,000,000 arrays in "tools" killed the
// server (stack overflow while copying the value; 100,000 levels in a message reached the
// template's own depth limit).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "chat/chat_template.h"
#include "server/api_error.h"
#include "server/job_builder.h"
#include "server/openai_request.h"
#include "support/tokenizer_test_support.h"

namespace qs {
namespace {

using ojson = nlohmann::ordered_json;

std::string nested(int depth, const std::string& inner = "1") {
  return std::string(static_cast<size_t>(depth), '[') + inner + std::string(static_cast<size_t>(depth), ']');
}

std::string nested_objects(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(static_cast<size_t>(depth), '}');
  return s;
}

const ChatTemplate& qwen3_template() {
  static const ChatTemplate tmpl = [] {
    std::ifstream in(test::qwen_tokenizer_dir() + "/tokenizer_config.json");
    return ChatTemplate(nlohmann::json::parse(in).at("chat_template").get<std::string>());
  }();
  return tmpl;
}

int status_of(const std::string& body) {
  try {
    const ojson parsed = parse_json_limited(body);
    const ServerOptions options;
    const JobContext ctx{options, test::qwen_tokenizer(), qwen3_template(), 1 << 20};
    if (parsed.contains("prompt")) {
      build_completion_job(parse_completion_request(parsed, test::qwen_tokenizer().vocab_size()), ctx);
    } else {
      build_chat_job(parse_chat_request(parsed, test::qwen_tokenizer().vocab_size()), ctx);
    }
    return 200;
  } catch (const ApiError& e) {
    return e.status();
  }
}

// Every place of a chat body that the parser, the job builder or the template walks.
const char* const kDeepFields[] = {
    R"({"messages":[{"role":"user","content":"hi","extra":DEEP}]})",
    R"({"messages":[{"role":"user","content":DEEP}]})",
    R"({"messages":[{"role":"user","content":[{"type":"text","text":"a","x":DEEP}]}]})",
    R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":DEEP}}]}]})",
    R"({"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"x":DEEP}}}]})",
    R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":DEEP})",
    R"({"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":DEEP}})",
    R"({"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"schema":DEEP}}})",
    R"({"messages":[{"role":"user","content":"hi"}],"logit_bias":{"1":DEEP}})",
    R"({"messages":[{"role":"user","content":"hi"}],"stop":DEEP,"max_tokens":DEEP,"temperature":DEEP})",
    R"({"messages":[{"role":"user","content":"hi"}],"stream_options":DEEP,"unknown":DEEP})",
    R"({"prompt":DEEP})",
    R"({"prompt":"x","logit_bias":DEEP})",
};

std::string with_deep(std::string body, const std::string& deep) {
  for (size_t at; (at = body.find("DEEP")) != std::string::npos;) body.replace(at, 4, deep);
  return body;
}

TEST(RequestExtremes, DeepNestingInEveryWalkedFieldIs400BeforeBuildingIt) {
  for (const char* field : kDeepFields) {
    for (const std::string& deep : {nested(1000000), nested_objects(1000000)}) {
      const std::string body = with_deep(field, deep);
      try {
        parse_json_limited(body);
        FAIL() << "accepted: " << std::string(field);
      } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << field;
        EXPECT_EQ(e.to_json()["error"]["code"], "json_too_deep") << field;
      }
    }
  }
}

TEST(RequestExtremes, NestingUpToTheLimitIsParsed) {
  // The body object is level 1, "messages" 2, the message 3, "extra" holds the rest.
  const std::string fits = with_deep(kDeepFields[0], nested(kMaxJsonDepth - 3));
  EXPECT_NO_THROW(parse_json_limited(fits));
  EXPECT_EQ(status_of(fits), 200);
  const std::string too_deep = with_deep(kDeepFields[0], nested(kMaxJsonDepth - 2));
  EXPECT_EQ(status_of(too_deep), 400);
  // Tools as deep as allowed reach the template (tojson) and render (parameters must be an
  // object, so the nesting starts one level further in).
  const std::string tools = with_deep(kDeepFields[4], nested(kMaxJsonDepth - 7));
  EXPECT_EQ(status_of(tools), 200);
}

TEST(RequestExtremes, DeepJsonInsideToolCallArgumentsStringStaysAString) {
  // OpenAI clients send arguments as a JSON string, which the parser decodes for the template:
  // a string holding 1,000,000 levels is left as it is instead of being decoded.
  const std::string args = ojson(nested(1000000)).dump();
  const std::string body = R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"c",)"
                           R"("tool_calls":[{"function":{"name":"f","arguments":)" + args + R"(}}]}]})";
  const ChatRequest request = parse_chat_request(parse_json_limited(body), test::qwen_tokenizer().vocab_size());
  EXPECT_TRUE(request.messages[1]["tool_calls"][0]["function"]["arguments"].is_string());
  EXPECT_EQ(status_of(body), 200);
  // A shallow one is decoded into an object.
  const ChatRequest shallow = parse_chat_request(
      parse_json_limited(R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":[1]}"}}]}]})"),
      test::qwen_tokenizer().vocab_size());
  EXPECT_TRUE(shallow.messages[0]["tool_calls"][0]["function"]["arguments"].is_object());
}

TEST(RequestExtremes, HugeCountsAndNumbersAre400) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  for (const std::string extra : {R"("max_tokens":1e30)", R"("max_tokens":18446744073709551615)",
                                  R"("max_tokens":-9223372036854775808)", R"("n":1000000)", R"("n":1e400)",
                                  R"("top_logprobs":4294967297)", R"("temperature":1e308)", R"("seed":1.5)",
                                  R"("logit_bias":{"99999999999999999999":1})", R"("timeout":1e400)"}) {
    EXPECT_EQ(status_of("{" + msgs + "," + extra + "}"), 400) << extra;
  }
  std::string stops = "[";
  for (int i = 0; i < 100000; ++i) stops += std::string(i ? "," : "") + "\"s\"";
  EXPECT_EQ(status_of("{" + msgs + ",\"stop\":" + stops + "]}"), 400) << "100000 stop strings";
}

TEST(RequestExtremes, LongStringsAndManyMessagesAreServedOrRefusedByLength) {
  // 1 MiB of text: tokenized, then refused because it does not fit the context (400, not a crash).
  const std::string long_text(1u << 20, 'a');
  const ServerOptions options;
  const JobContext small{options, test::qwen_tokenizer(), qwen3_template(), 4096};
  const ojson body = parse_json_limited(R"({"messages":[{"role":"user","content":")" + long_text + R"("}]})");
  try {
    build_chat_job(parse_chat_request(body, test::qwen_tokenizer().vocab_size()), small);
    FAIL() << "a 1 MiB prompt fitted a 4096-token context";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("maximum context length"), std::string::npos) << e.what();
  }
  // 20000 messages render.
  ojson many = ojson::object();
  many["messages"] = ojson::array();
  for (int i = 0; i < 20000; ++i) many["messages"].push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "m"}});
  EXPECT_EQ(status_of(many.dump()), 200);
}

// Found by the responses / messages / chat_template_kwargs fuzz targets: nlohmann's parse error
// quotes the bytes it last read, so a malformed body with invalid UTF-8 gave an error message that
// does not serialise as JSON (type_error 316 from a strict dump; send_json's lossy dump hid it).
// Inputs: tests/fuzz/regressions/{responses,messages}_request_fuzz, chat_template_kwargs_fuzz.
TEST(RequestExtremes, MalformedJsonWithInvalidUtf8GivesASerialisableError) {
  for (const std::string& body : {std::string("{\"enable_thinking\xbb: null}"), std::string("{\xff\xff\"input\": 1}")}) {
    try {
      parse_json_limited(body);
      ADD_FAILURE() << "parsed";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.code(), "invalid_json");
      std::string dumped;
      EXPECT_NO_THROW(dumped = e.to_json().dump()) << e.what();  // strict: throws on invalid UTF-8
      EXPECT_NE(std::string(e.what()).find("\xEF\xBF\xBD"), std::string::npos) << e.what();  // U+FFFD
    }
  }
}

// A client reads where its JSON broke, not the parser library's exception class.
TEST(RequestExtremes, MalformedJsonMessageSaysWhereWithoutLibraryInternals) {
  try {
    parse_json_limited("{\"messages\": [}");
    ADD_FAILURE() << "parsed";
  } catch (const ApiError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("malformed JSON body: ", 0), 0u) << message;
    EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
    EXPECT_NE(message.find("line 1, column 15"), std::string::npos) << message;  // the '}' is byte 15
  }
}

}  // namespace
}  // namespace qs
