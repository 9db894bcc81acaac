// core::wake: the relay's line protocol, what both ends accept and refuse.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "awp/core/channels.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/wake.hpp"

namespace wake_protocol_test {

using namespace awp::core;

namespace {
constexpr const char* kGw = "58ea208a-62fb-446f-b2ea-4d4c478f1377";
constexpr const char* kId = "0f0e0d0c-0b0a-4998-8776-655443322110";
}  // namespace

TEST_CASE("wake: every per-gateway channel of core::channels parses, with its gateway",
          "[wake][protocol]") {
    for (const auto& ch : {channels::commands(kGw), channels::inbox(kGw), channels::secrets(kGw)}) {
        const auto c = wake::parse_channel(ch);
        REQUIRE(c);
        CHECK(c->gateway_hex == "58ea208a62fb446fb2ea4d4c478f1377");
        CHECK(wake::gateway_hex(kGw) == std::string(c->gateway_hex));
    }
    CHECK_FALSE(wake::parse_channel(channels::kEmbed));  // not a gateway's
    CHECK_FALSE(wake::parse_channel("awp_commands_58EA208A62FB446FB2EA4D4C478F1377"));
    CHECK_FALSE(wake::parse_channel("awp_commands_58ea208a62fb446fb2ea4d4c478f137"));
    CHECK_FALSE(wake::parse_channel("awp_commands_58ea208a62fb446fb2ea4d4c478f13770"));
    CHECK_FALSE(wake::parse_channel("awp_other_58ea208a62fb446fb2ea4d4c478f1377"));
}

TEST_CASE("wake: lines round-trip and anything else is refused", "[wake][protocol]") {
    wake::line l;
    l.what = wake::line::kind::wake;
    l.channel = channels::commands(kGw);
    l.payload = kId;
    const std::string text = wake::format_wake(l);
    REQUIRE(text.back() == '\n');
    const auto back = wake::parse_line(text.substr(0, text.size() - 1));
    REQUIRE(back);
    CHECK(back->what == wake::line::kind::wake);
    CHECK(back->channel == l.channel);
    CHECK(back->payload == kId);
    // An empty payload ("several rows changed") is a wake-up too.
    const auto empty = wake::parse_line(channels::inbox(kGw) + " ");
    REQUIRE(empty);
    CHECK(empty->payload.empty());

    CHECK(wake::parse_line("ping")->what == wake::line::kind::ping);
    CHECK(wake::parse_line("rescan")->what == wake::line::kind::rescan);
    const auto ready = wake::parse_line(std::string("ready ") + kGw);
    REQUIRE(ready);
    CHECK(ready->what == wake::line::kind::ready);
    CHECK(ready->channel == kGw);

    for (const std::string& bad :
         {std::string(""), std::string("PING"), std::string("ping "), std::string("ready "),
          std::string("ready ") + kGw + "x", channels::commands(kGw),
          channels::commands(kGw) + " x", channels::commands(kGw) + " " + kId + " ",
          channels::commands(kGw) + "  " + kId, channels::commands(kGw) + " " + kId + "\n",
          channels::commands(kGw) + " 0F0E0D0C-0B0A-4998-8776-655443322110",
          std::string("awp_embed ") + kId, std::string(1000, 'a'),
          channels::commands(kGw) + " " + std::string(300, '0')}) {
        INFO(bad);
        CHECK_FALSE(wake::parse_line(bad));
    }
    // The relay's check of what is NOTIFYed is the same, minus the relay's own words.
    CHECK_FALSE(wake::parse_notify_payload("rescan"));
    CHECK_FALSE(wake::parse_notify_payload(std::string("ready ") + kGw));
    CHECK(wake::parse_notify_payload(channels::secrets(kGw) + " " + kId));
}

TEST_CASE("wake: the relay reads Basic credentials and nothing else",
          "[wake][protocol][security]") {
    const auto c = wake::parse_basic_credentials("Basic YXdwX2d3X3g6czNjcjp0");  // awp_gw_x:s3cr:t
    REQUIRE(c);
    CHECK(c->user == "awp_gw_x");
    CHECK(c->password == "s3cr:t");  // a password may hold ':'
    CHECK(wake::parse_basic_credentials("basic YXdwX2d3X3g6czNjcjp0"));
    for (const std::string& bad :
         {std::string(""), std::string("Basic "), std::string("Bearer YXdwX2d3X3g6czNjcjp0"),
          std::string("Basic !!!"), std::string("Basic OnBhc3M="),  // ":pass": no user
          std::string("Basic dXNlcg=="),                            // "user": no colon
          std::string("Basic dQB4OnA="),                            // "u\0x:p"
          "Basic " + std::string(2000, 'A')}) {
        INFO(bad);
        CHECK_FALSE(wake::parse_basic_credentials(bad));
    }
}

TEST_CASE("wake: a gateway key has exactly the shape the database accepts", "[wake]") {
    namespace pg = awp::core::pg;
    const std::string hex(32, 'a'), secret = std::string(42, 'Z') + "_";
    const std::string key = "awpk_" + hex + "_" + secret;
    CHECK(pg::is_gateway_key(key));
    CHECK(
        pg::is_gateway_key("awpk_0123456789abcdef0123456789abcdef_" + std::string(41, '-') + "Az"));
    for (const auto& bad : std::vector<std::string>{
             "", "awpk_", key + "x", key.substr(0, 80), "AWPK_" + key.substr(5),
             "awpk_" + std::string(32, 'A') + "_" + secret,  // the id is lowercase hex
             "awpk_" + hex + "-" + secret, "awpk_" + hex + "_" + std::string(42, 'Z') + "=",
             "awpk_" + hex + "_" + std::string(42, 'Z') + "\n",
             "awpk_" + hex + "_" + std::string(42, 'Z') + std::string(1, '\0')}) {
        INFO(bad);
        CHECK_FALSE(pg::is_gateway_key(bad));
    }
}

}  // namespace wake_protocol_test
