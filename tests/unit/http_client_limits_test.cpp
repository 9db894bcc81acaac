// The client's address behind trusted proxies (awp::http::client_address) and the request-rate
// limiter (awp::http::rate_limiter): only a trusted proxy's X-Forwarded-For is believed, read
// from the right; token buckets refill at their rate, refuse without charging, charge every
// bucket of a request or none, and stay within their bound of keys.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "awp/core/error.hpp"
#include "awp/http/client_address.hpp"
#include "awp/http/rate_limit.hpp"

namespace http_client_limits_test {

namespace http = awp::http;
using namespace std::chrono_literals;

namespace {

http::headers xff(std::initializer_list<std::string> values) {
    http::headers h;
    for (const auto& v : values) h.add("X-Forwarded-For", v);
    return h;
}

}  // namespace

TEST_CASE("client address: only a trusted proxy's X-Forwarded-For is believed", "[http][limits]") {
    const http::trusted_proxies none;
    const http::trusted_proxies proxy("127.0.0.1, 10.0.0.0/8, fd00::/8");
    // No trusted proxy: the header is ignored, whatever it says.
    CHECK(http::client_address("127.0.0.1", xff({"203.0.113.7"}), none) == "127.0.0.1");
    // An untrusted peer's header is ignored too.
    CHECK(http::client_address("198.51.100.2", xff({"203.0.113.7"}), proxy) == "198.51.100.2");
    // The proxy's: the address it appended.
    CHECK(http::client_address("127.0.0.1", xff({"203.0.113.7"}), proxy) == "203.0.113.7");
    // A client that sends its own header: the proxy appends the real address; what the client
    // wrote on the left is never reached.
    CHECK(http::client_address("127.0.0.1", xff({"1.2.3.4, 203.0.113.7"}), proxy) == "203.0.113.7");
    // Two trusted hops (a load balancer in 10/8 behind the TLS proxy): the first untrusted.
    CHECK(http::client_address("127.0.0.1", xff({"1.2.3.4, 203.0.113.7, 10.1.2.3"}), proxy) ==
          "203.0.113.7");
    CHECK(http::client_address("127.0.0.1", xff({"1.2.3.4", "203.0.113.7", "10.1.2.3"}), proxy) ==
          "203.0.113.7");
    // Every hop trusted: the leftmost.
    CHECK(http::client_address("127.0.0.1", xff({"10.9.9.9, 10.1.2.3"}), proxy) == "10.9.9.9");
    // A malformed hop stops the walk at the trusted proxy that forwarded it.
    CHECK(http::client_address("127.0.0.1", xff({"1.2.3.4, not-an-ip"}), proxy) == "127.0.0.1");
    CHECK(http::client_address("127.0.0.1", xff({"203.0.113.7:4711"}), proxy) == "127.0.0.1");
    CHECK(http::client_address("127.0.0.1", xff({"1.2.3.4, 10.1.2.3, garbage"}), proxy) ==
          "127.0.0.1");
    // No header from a trusted proxy: the proxy.
    CHECK(http::client_address("127.0.0.1", {}, proxy) == "127.0.0.1");
    // IPv6, and IPv4 inside IPv6 as IPv4.
    CHECK(http::client_address("fd00::1", xff({"2001:db8::1"}), proxy) == "2001:db8::1");
    CHECK(http::client_address("::ffff:127.0.0.1", xff({"::ffff:203.0.113.9"}), proxy) ==
          "203.0.113.9");
    // Case of the header name does not matter.
    http::headers lower;
    lower.add("x-forwarded-for", "203.0.113.8");
    CHECK(http::client_address("127.0.0.1", lower, proxy) == "203.0.113.8");
}

TEST_CASE("client address: a bad trusted-proxy entry is named", "[http][limits]") {
    CHECK_NOTHROW(http::trusted_proxies(""));
    CHECK_NOTHROW(http::trusted_proxies(" 192.168.0.0/16 , ::1 "));
    for (const std::string bad :
         {"localhost", "10.0.0.0/33", "10.0.0.0/", "::1/129", "10.0.0.0/x"}) {
        CAPTURE(bad);
        try {
            http::trusted_proxies p(bad);
            FAIL("accepted");
        } catch (const awp::core::config_error& e) {
            CHECK(std::string(e.what()).find(bad) != std::string::npos);
        }
    }
}

TEST_CASE("rate rules: N/s, N/min, N/h with an optional burst, or off", "[http][limits]") {
    auto r = http::rate_rule::parse("100/s", "X");
    CHECK(r.per_second == 100);
    CHECK(r.burst == 100);
    CHECK(r.to_string() == "100/s");
    r = http::rate_rule::parse("30/min:10", "X");
    CHECK(r.per_second == Approx(0.5));
    CHECK(r.burst == 10);
    CHECK(r.to_string() == "30/min:10");
    r = http::rate_rule::parse("36/h", "X");
    CHECK(r.per_second == Approx(0.01));
    CHECK(r.to_string() == "36/h");
    CHECK(http::rate_rule::parse("off", "X").off());
    CHECK(http::rate_rule::parse("0", "X").off());
    for (const std::string bad : {"", "10", "10/d", "-1/s", "x/s", "10/s:", "10/s:0", "1e10/s"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(http::rate_rule::parse(bad, "API_RATE_X"), awp::core::config_error);
    }
}

TEST_CASE("rate limiter: a burst, then the refill rate, and a refusal charges nothing",
          "[http][limits]") {
    http::rate_limiter l;
    const auto rule = http::rate_rule::parse("2/s:4", "X");
    const auto t0 = http::rate_limiter::clock::now();
    for (int i = 0; i < 4; ++i) CHECK_FALSE(l.take({{"a", rule}}, t0));
    auto no = l.take({{"a", rule}}, t0);
    REQUIRE(no);
    CHECK(no->retry_after == 1);  // half a second, rounded up
    // Refused requests took nothing: half a second later one token is there.
    for (int i = 0; i < 100; ++i) CHECK(l.take({{"a", rule}}, t0 + 100ms));
    CHECK_FALSE(l.take({{"a", rule}}, t0 + 500ms));
    CHECK(l.take({{"a", rule}}, t0 + 500ms));
    // Another key has its own bucket.
    CHECK_FALSE(l.take({{"b", rule}}, t0));
    // A slow rule says how long to wait.
    const auto slow = http::rate_rule::parse("6/min:1", "X");
    CHECK_FALSE(l.take({{"c", slow}}, t0));
    no = l.take({{"c", slow}}, t0);
    REQUIRE(no);
    CHECK(no->retry_after == 10);
}

TEST_CASE("rate limiter: a request is charged to all its buckets or to none", "[http][limits]") {
    http::rate_limiter l;
    const auto address = http::rate_rule::parse("3/s", "X");
    const auto user = http::rate_rule::parse("1/s", "X");
    const auto t = http::rate_limiter::clock::now();
    CHECK_FALSE(l.take({{"addr", address}, {"alice", user}}, t));
    auto no = l.take({{"addr", address}, {"alice", user}}, t);
    REQUIRE(no);
    CHECK(no->charge == 1);  // alice's bucket is the one that waits
    // The address was not charged by the refusal: two more from it (other users) pass.
    CHECK_FALSE(l.take({{"addr", address}, {"bob", user}}, t));
    CHECK_FALSE(l.take({{"addr", address}, {"carol", user}}, t));
    no = l.take({{"addr", address}, {"dave", user}}, t);
    REQUIRE(no);
    CHECK(no->charge == 0);
    // A rule that is off is no bucket.
    CHECK_FALSE(l.take({{"addr", http::rate_rule{}}, {"erin", user}}, t));
}

TEST_CASE("rate limiter: bounded keys, and a flood of new keys does not reset a drained bucket",
          "[http][limits]") {
    const auto rule = http::rate_rule::parse("1/s:2", "X");
    const auto t = http::rate_limiter::clock::now();
    http::rate_limiter l(16 * 8);  // 8 per shard
    for (int i = 0; i < 5000; ++i) (void)l.take({{"k" + std::to_string(i), rule}}, t);
    CHECK(l.size() <= 16 * 8);
    // A client at its limit, then 5,000 other keys at once (each half used): the drained
    // bucket is kept, the client is still refused.
    http::rate_limiter m(16 * 8);
    const auto slow = http::rate_rule::parse("1/h:2", "X");
    CHECK_FALSE(m.take({{"busy", slow}}, t));
    CHECK_FALSE(m.take({{"busy", slow}}, t));
    CHECK(m.take({{"busy", slow}}, t));
    for (int i = 0; i < 5000; ++i) (void)m.take({{"flood" + std::to_string(i), rule}}, t + 10ms);
    CHECK(m.size() <= 16 * 8);
    CHECK(m.take({{"busy", slow}}, t + 20ms));
}

TEST_CASE("rate limiter: IPv6 clients are counted by /64", "[http][limits]") {
    CHECK(http::address_key("203.0.113.7") == "203.0.113.7");
    CHECK(http::address_key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64");
    CHECK(http::address_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64");
    CHECK(http::address_key("not an address") == "not an address");
}

}  // namespace http_client_limits_test
