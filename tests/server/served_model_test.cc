// The "model" field of a generation request: the served name, one of its aliases or nothing is
// accepted; any other name is vLLM's / OpenAI's 404 with param "model".
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/job_builder.h"

namespace qs {
namespace {

TEST(ServedModel, ServedNameAliasesAndAbsentAreAccepted) {
  ServerOptions options;
  options.served_model_name = "tiny";
  options.served_model_aliases = {"tiny-alias", "other"};
  EXPECT_EQ(served_model_for("tiny", options), "tiny");
  EXPECT_EQ(served_model_for("tiny-alias", options), "tiny-alias");
  EXPECT_EQ(served_model_for("other", options), "other");
  EXPECT_EQ(served_model_for("", options), "tiny") << "absent (or null / empty) model: the served name";
}

TEST(ServedModel, UnknownNameIs404NamingTheModel) {
  ServerOptions options;
  options.served_model_name = "tiny";
  for (const std::string name : {"nonexistent", "Tiny", "tiny ", "qwenserve"}) {
    try {
      served_model_for(name, options);
      FAIL() << name << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 404);
      const auto j = e.to_json();
      EXPECT_EQ(j["error"]["message"], "The model `" + name + "` does not exist.");
      EXPECT_EQ(j["error"]["param"], "model");
      EXPECT_EQ(j["error"]["type"], "invalid_request_error");  // OpenAI's unknown-model error
      EXPECT_EQ(j["error"]["code"], "model_not_found");
    }
  }
  // A huge name is quoted back cut (at a UTF-8 boundary), not whole.
  try {
    served_model_for(std::string(255, 'm') + "\xc3\xa9" + std::string(1 << 20, 'x'), options);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(std::string(e.what()), "The model `" + std::string(255, 'm') + "...` does not exist.");
  }
}

}  // namespace
}  // namespace qs
