// Time helpers: ISO 8601 UTC text with milliseconds, "now" in milliseconds, and the wait of a
// periodic task.
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
/// Whole seconds since the Unix epoch, wall clock (a JWT's iat and exp).
[[nodiscard]] std::int64_t now_unix_s();

/// A wait drawn uniformly from [lo, hi] (each thread its own generator): how a fleet of daemons
/// keeps out of step (pg::backoff's reconnects, periodic_wait).
[[nodiscard]] std::chrono::milliseconds random_wait(std::chrono::milliseconds lo,
                                                    std::chrono::milliseconds hi);

/// The wait before the next run of a periodic task (a safety poll, a heartbeat): drawn
/// uniformly from [3/4, 1] x `period`, so that daemons that started together (a deploy, a
/// restart of the database or of awp-wake) do not all act in the same instant every period
/// after (1,000 gateway hosts are 2,000 leases at once); never longer than `period`, so a lost
/// wake-up still costs at most one safety poll and a heartbeat is never later than its interval.
[[nodiscard]] std::chrono::milliseconds periodic_wait(std::chrono::milliseconds period);

}  // namespace awp::core
