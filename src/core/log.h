// The process's own lines on stderr (serving, draining, stopped, warnings), as opposed to the
// per-request lines (metrics/request_log.h, server/rejection_log.h): plain text by default, one JSON
// object per line once use_json(true) (serve --log-format json), so that a log collector that
// parses every line as JSON reads them all.
//
// JSON fields: ts (ISO 8601 UTC with milliseconds, as the request lines), level ("info" |
// "warning" | "error"), message (the text line's words without its "qwenserve: " / "warning: " /
// "error: " prefix). A fatal error (the command's last line, exit status 1) is "error".
#pragma once

#include <chrono>
#include <string>

namespace qs {

/// `time` as ISO 8601 UTC with milliseconds, e.g. 2026-12-03T05:48:07.123Z.
std::string format_iso8601_utc(std::chrono::system_clock::time_point time);

namespace process_log {

enum class Level { kInfo, kWarning, kError };

/// From now on, lines are JSON (true) or text (false, the default). Thread-safe.
void use_json(bool json);

/// Whether lines are JSON now (use_json).
bool uses_json();

/// The text line of `message` (no newline): "qwenserve: MESSAGE" (info), "qwenserve: warning:
/// MESSAGE" or "error: MESSAGE" (the CLI's fatal-error line).
std::string text_line(Level level, const std::string& message);

/// The JSON line of `message` at `at` (no newline); invalid UTF-8 becomes U+FFFD.
std::string json_line(Level level, const std::string& message, std::chrono::system_clock::time_point at);

/// Writes `message` to stderr as one line in the current format.
void write(Level level, const std::string& message);
inline void info(const std::string& message) { write(Level::kInfo, message); }
inline void warning(const std::string& message) { write(Level::kWarning, message); }

}  // namespace process_log
}  // namespace qs
