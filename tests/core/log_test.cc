// The process's lifecycle lines (core/log.h): text by default, JSON objects (RFC 8259, parsed by
// nlohmann::json) with ts / level / message under --log-format json.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "core/log.h"

namespace qs {
namespace {

TEST(ProcessLog, TextLinesKeepTheirPrefixes) {
  EXPECT_EQ(process_log::text_line(process_log::Level::kInfo, "stopped"), "qwenserve: stopped");
  EXPECT_EQ(process_log::text_line(process_log::Level::kWarning, "--ctx-size 9 exceeds 8"),
            "qwenserve: warning: --ctx-size 9 exceeds 8");
  EXPECT_EQ(process_log::text_line(process_log::Level::kError, "cannot open x.gguf"), "error: cannot open x.gguf");
}

TEST(ProcessLog, JsonLineIsOneObjectWithTimeLevelAndMessage) {
  using namespace std::chrono;
  const system_clock::time_point at = system_clock::time_point{} + 86400s + 1500ms;
  const std::string line = process_log::json_line(process_log::Level::kWarning, "a \"quoted\"\nline", at);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line: the newline in the message is escaped";
  const nlohmann::json parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["ts"], "1970-01-02T00:00:01.500Z");
  EXPECT_EQ(parsed["level"], "warning");
  EXPECT_EQ(parsed["message"], "a \"quoted\"\nline");
  EXPECT_EQ(nlohmann::json::parse(process_log::json_line(process_log::Level::kInfo, "x", at))["level"], "info");
  EXPECT_EQ(nlohmann::json::parse(process_log::json_line(process_log::Level::kError, "x", at))["level"], "error");
}

TEST(ProcessLog, InvalidUtf8IsReplacedNotThrown) {
  const std::string line = process_log::json_line(process_log::Level::kInfo, std::string("model \xff.gguf"),
                                                  std::chrono::system_clock::time_point{});
  EXPECT_EQ(nlohmann::json::parse(line)["message"], "model \xEF\xBF\xBD.gguf");  // U+FFFD
}

}  // namespace
}  // namespace qs
