// ISO 8601 formatting on the C++20 calendar types (no gmtime, no locale, no global state), and
// the random waits that keep a fleet of daemons out of step.
#include "awp/core/time.hpp"

#include <array>
#include <cstdio>
#include <random>

namespace awp::core {

std::string format_iso8601_utc(std::chrono::system_clock::time_point t) {
    using namespace std::chrono;
    // floor, not duration_cast: instants before 1970 must not round toward the epoch.
    const auto ms = floor<milliseconds>(t);
    const auto day = floor<days>(ms);
    const year_month_day date{day};
    const hh_mm_ss clock{ms - day};
    std::array<char, 40> text{};
    const int n = std::snprintf(
        text.data(), text.size(), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ",
        static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
        static_cast<unsigned>(date.day()), static_cast<int>(clock.hours().count()),
        static_cast<int>(clock.minutes().count()), static_cast<int>(clock.seconds().count()),
        static_cast<int>(clock.subseconds().count()));
    return std::string(text.data(), static_cast<std::size_t>(n));
}

std::string now_iso8601_utc() { return format_iso8601_utc(std::chrono::system_clock::now()); }

std::int64_t now_unix_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

std::int64_t now_unix_s() { return now_unix_ms() / 1000; }

std::chrono::milliseconds random_wait(std::chrono::milliseconds lo, std::chrono::milliseconds hi) {
    thread_local std::mt19937 rng{std::random_device{}()};
    if (hi <= lo) return lo;
    std::uniform_int_distribution<long long> draw(lo.count(), hi.count());
    return std::chrono::milliseconds(draw(rng));
}

std::chrono::milliseconds periodic_wait(std::chrono::milliseconds period) {
    if (period.count() <= 0) return period;
    return random_wait(period - period / 4, period);
}

}  // namespace awp::core
