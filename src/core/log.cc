#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace qs {

std::string format_iso8601_utc(std::chrono::system_clock::time_point time) {
  using namespace std::chrono;
  const auto ms = floor<milliseconds>(time);
  const auto day = floor<days>(ms);
  const year_month_day date{day};
  const hh_mm_ss clock{ms - day};
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                static_cast<int>(clock.seconds().count()), static_cast<int>(clock.subseconds().count()));
  return buffer;
}

namespace process_log {
namespace {

std::atomic<bool> g_json{false};

const char* level_name(Level level) {
  switch (level) {
    case Level::kWarning: return "warning";
    case Level::kError: return "error";
    case Level::kInfo: break;
  }
  return "info";
}

}  // namespace

void use_json(bool json) { g_json.store(json, std::memory_order_relaxed); }

bool uses_json() { return g_json.load(std::memory_order_relaxed); }

std::string text_line(Level level, const std::string& message) {
  switch (level) {
    case Level::kWarning: return "qwenserve: warning: " + message;
    case Level::kError: return "error: " + message;
    case Level::kInfo: break;
  }
  return "qwenserve: " + message;
}

std::string json_line(Level level, const std::string& message, std::chrono::system_clock::time_point at) {
  const nlohmann::ordered_json line = {
      {"ts", format_iso8601_utc(at)},
      {"level", level_name(level)},
      {"message", message},
  };
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void write(Level level, const std::string& message) {
  const std::string line = g_json.load(std::memory_order_relaxed)
                               ? json_line(level, message, std::chrono::system_clock::now())
                               : text_line(level, message);
  std::fprintf(stderr, "%s\n", line.c_str());  // one call: lines of concurrent writers do not interleave
}

}  // namespace process_log
}  // namespace qs
