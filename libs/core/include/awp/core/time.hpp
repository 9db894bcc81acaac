// Wall-clock helpers: ISO 8601 UTC text with milliseconds, and "now" in milliseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace awp::core {

/// "2026-01-02T03:04:05.678Z": UTC, milliseconds truncated toward the past.
[[nodiscard]] std::string format_iso8601_utc(std::chrono::system_clock::time_point t);
/// format_iso8601_utc(now).
[[nodiscard]] std::string now_iso8601_utc();
/// Milliseconds since the Unix epoch, wall clock.
[[nodiscard]] std::int64_t now_unix_ms();

}  // namespace awp::core
