// Unit tests of awp::core::uuid (v4 generation, strict parsing) and the ISO 8601 time helpers.
#include "awp/core/time.hpp"
#include "awp/core/uuid.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <regex>
#include <set>
#include <string>

namespace uuid_time_test {

using awp::core::format_iso8601_utc;
using awp::core::is_valid_uuid;
using awp::core::uuid;

TEST_CASE("generated UUIDs are random version 4 in canonical lowercase form", "[uuid]") {
    const std::regex canonical(
        "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    std::set<std::string> seen;
    for (int i = 0; i < 200; ++i) {
        const auto id = uuid::generate_v4();
        const auto text = id.to_string();
        CHECK(std::regex_match(text, canonical));
        CHECK(id.version() == 4);
        CHECK(seen.insert(text).second);
        CHECK(uuid::parse(text) == id);
    }
}

TEST_CASE("UUID parsing accepts the canonical form in either case", "[uuid]") {
    const auto id = uuid::parse("123E4567-e89b-12D3-a456-426614174000");
    REQUIRE(id);
    CHECK(id->to_string() == "123e4567-e89b-12d3-a456-426614174000");
    CHECK(id->without_dashes() == "123e4567e89b12d3a456426614174000");
    CHECK(id->version() == 1);
    CHECK(uuid::parse("00000000-0000-0000-0000-000000000000")->is_nil());
    CHECK_FALSE(uuid::generate_v4().is_nil());
}

TEST_CASE("UUID parsing rejects every other form", "[uuid]") {
    for (const char* bad :
         {"", "123e4567e89b12d3a456426614174000",  // no dashes
          "{123e4567-e89b-12d3-a456-426614174000}", "urn:uuid:123e4567-e89b-12d3-a456-426614174000",
          " 123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000 ",
          "123e4567-e89b-12d3-a456-42661417400",    // short
          "123e4567-e89b-12d3-a456-4266141740000",  // long
          "123e4567-e89b-12d3-a456_426614174000",   // wrong separator
          "123e4567e-89b-12d3-a456-426614174000",   // dash moved
          "g23e4567-e89b-12d3-a456-426614174000",   // not hex
          "123e4567-e89b-12d3-a456-42661417400\xc3\xa9"}) {
        CAPTURE(bad);
        CHECK_FALSE(uuid::parse(bad));
        CHECK_FALSE(is_valid_uuid(bad));
    }
}

TEST_CASE("ISO 8601 UTC text has milliseconds and a Z", "[uuid][time]") {
    using namespace std::chrono;
    const sys_days day = year{2026} / January / 2;
    const auto t = day + 3h + 4min + 5s + 678ms + 999us;
    CHECK(format_iso8601_utc(t) == "2026-01-02T03:04:05.678Z");
    CHECK(format_iso8601_utc(system_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
    CHECK(format_iso8601_utc(system_clock::time_point{} - 1ms) == "1969-12-31T23:59:59.999Z");
    const sys_days leap = year{2024} / February / 29;
    CHECK(format_iso8601_utc(leap + 23h + 59min + 59s) == "2024-02-29T23:59:59.000Z");
}

TEST_CASE("now in milliseconds follows the system clock", "[uuid][time]") {
    using namespace std::chrono;
    const auto before = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    const auto now = awp::core::now_unix_ms();
    const auto after = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    CHECK(before <= now);
    CHECK(now <= after);
    CHECK(std::regex_match(awp::core::now_iso8601_utc(),
                           std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
}

}  // namespace uuid_time_test
