// core::heartbeat::details: the daemon's part of its heartbeat row, a flat JSON object.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "awp/core/heartbeat.hpp"

namespace heartbeat_details_test {

using awp::core::heartbeat::details;

TEST_CASE("heartbeat details are a JSON object in the order added", "[heartbeat]") {
    CHECK(details().json() == "{}");
    details d;
    d.add("last_tick", std::int64_t{-1})
        .add("ticks_run", std::uint64_t{18446744073709551615ULL})
        .add("in_flight", 3)
        .add("ok", true)
        .add("runtime", "openclaw")
        .add("error", std::string("say \"no\"\n\\"));
    CHECK(d.json() == R"({"last_tick":-1,"ticks_run":18446744073709551615,"in_flight":3,"ok":true,)"
                      R"("runtime":"openclaw","error":"say \"no\"\n\\"})");
    // A key added again keeps its place and takes the new value.
    d.add("in_flight", 4);
    CHECK(d.json().find(R"("in_flight":4,"ok")") != std::string::npos);
}

}  // namespace heartbeat_details_test
