// The outbound address policy: every range of the classifier (IPv4, IPv6, IPv4 inside IPv6),
// the database ports, the operator's allow list and the two scopes; fetch refusing before it
// connects (the check sees every resolved address, and nothing reaches the listener).
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "awp/core/pg.hpp"
#include "awp/http/client.hpp"
#include "awp/http/outbound.hpp"

namespace http_outbound_test {

namespace http = awp::http;
namespace net = boost::asio;
using http::address_class;
using http::outbound_scope;

namespace {

net::ip::address ip(const char* s) { return net::ip::make_address(s); }

address_class cls(const char* s) { return http::classify(ip(s)); }

std::optional<std::string> refusal(const http::outbound_policy& p, const char* host,
                                   std::uint16_t port, outbound_scope scope,
                                   const std::vector<net::ip::address>& own = {}) {
    return p.refusal(host, ip(host), port, scope, own);
}

}  // namespace

TEST_CASE("the classifier knows every IPv4 range that is not the public internet",
          "[http][outbound]") {
    CHECK(cls("0.0.0.0") == address_class::unspecified);
    CHECK(cls("0.1.2.3") == address_class::this_network);
    CHECK(cls("127.0.0.1") == address_class::loopback);
    CHECK(cls("127.255.1.2") == address_class::loopback);
    CHECK(cls("10.0.0.1") == address_class::private_net);
    CHECK(cls("172.16.0.1") == address_class::private_net);
    CHECK(cls("172.31.255.255") == address_class::private_net);
    CHECK(cls("172.32.0.1") == address_class::global);
    CHECK(cls("192.168.1.1") == address_class::private_net);
    CHECK(cls("100.64.0.1") == address_class::private_net);
    CHECK(cls("169.254.169.254") == address_class::link_local);
    CHECK(cls("169.254.0.1") == address_class::link_local);
    CHECK(cls("224.0.0.1") == address_class::multicast);
    CHECK(cls("239.255.255.250") == address_class::multicast);
    CHECK(cls("255.255.255.255") == address_class::broadcast);
    CHECK(cls("240.0.0.1") == address_class::reserved);
    CHECK(cls("192.0.2.10") == address_class::reserved);
    CHECK(cls("8.8.8.8") == address_class::global);
    CHECK(cls("1.1.1.1") == address_class::global);
    CHECK(cls("169.253.255.255") == address_class::global);
}

TEST_CASE("the classifier knows IPv6 ranges and the IPv4 addresses hidden inside IPv6",
          "[http][outbound]") {
    CHECK(cls("::") == address_class::unspecified);
    CHECK(cls("::1") == address_class::loopback);
    CHECK(cls("fe80::1") == address_class::link_local);
    CHECK(cls("febf::1") == address_class::link_local);
    CHECK(cls("fd00:ec2::254") == address_class::private_net);
    CHECK(cls("fc00::1") == address_class::private_net);
    CHECK(cls("fec0::1") == address_class::private_net);
    CHECK(cls("ff02::1") == address_class::multicast);
    CHECK(cls("2001:db8::1") == address_class::reserved);
    CHECK(cls("2606:4700:4700::1111") == address_class::global);
    // Mapped, compatible, NAT64 and 6to4 forms are their IPv4 address.
    CHECK(cls("::ffff:169.254.169.254") == address_class::link_local);
    CHECK(cls("::ffff:127.0.0.1") == address_class::loopback);
    CHECK(cls("::ffff:10.1.2.3") == address_class::private_net);
    CHECK(cls("::ffff:0.0.0.0") == address_class::unspecified);
    CHECK(cls("::ffff:8.8.8.8") == address_class::global);
    CHECK(cls("::169.254.169.254") == address_class::link_local);
    CHECK(cls("::127.0.0.1") == address_class::loopback);
    CHECK(cls("64:ff9b::a9fe:a9fe") == address_class::link_local);  // 169.254.169.254
    CHECK(cls("64:ff9b::808:808") == address_class::global);
    CHECK(cls("2002:a9fe:a9fe::1") == address_class::link_local);
    CHECK(cls("2002:7f00:1::1") == address_class::loopback);
}

TEST_CASE("link-local, multicast, broadcast and database ports are refused whatever is allowed",
          "[http][outbound]") {
    const http::outbound_policy p("169.254.0.0/16, 0.0.0.0/0, ::/0, 224.0.0.0/4", {5432, 54343});
    for (const char* host : {"169.254.169.254", "::ffff:169.254.169.254", "fe80::1", "0.0.0.0",
                             "::", "224.0.0.1", "255.255.255.255", "0.1.2.3"}) {
        for (auto scope : {outbound_scope::internet, outbound_scope::own_host}) {
            INFO(host);
            auto why = refusal(p, host, 80, scope);
            REQUIRE(why);
            CHECK(why->find("never contacted") != std::string::npos);
        }
    }
    CHECK(refusal(p, "169.254.169.254", 80, outbound_scope::internet)->find("link-local") !=
          std::string::npos);
    // The database ports on any host, loopback and public alike, even when allowed.
    for (const char* host : {"127.0.0.1", "::1", "8.8.8.8", "10.0.0.5", "::ffff:127.0.0.1"}) {
        for (std::uint16_t port : {std::uint16_t{5432}, std::uint16_t{54343}}) {
            INFO(host << ":" << port);
            auto why = refusal(p, host, port, outbound_scope::internet);
            REQUIRE(why);
            CHECK(why->find("database port") != std::string::npos);
        }
    }
    CHECK_FALSE(refusal(p, "8.8.8.8", 443, outbound_scope::internet));
}

TEST_CASE("loopback and private addresses are refused for tenants unless the operator allows them",
          "[http][outbound]") {
    const http::outbound_policy none("", {5432});
    for (const char* host : {"127.0.0.1", "::1", "10.0.0.1", "192.168.0.10", "fd00::1",
                             "::ffff:127.0.0.1", "::ffff:192.168.0.1"}) {
        INFO(host);
        auto why = refusal(none, host, 8080, outbound_scope::internet);
        REQUIRE(why);
        CHECK(why->find("API_OUTBOUND_ALLOW") != std::string::npos);
    }
    CHECK_FALSE(refusal(none, "93.184.216.34", 443, outbound_scope::internet));
    CHECK_FALSE(refusal(none, "2606:4700:4700::1111", 443, outbound_scope::internet));

    const http::outbound_policy some("127.0.0.1:9000, 10.1.0.0/16, [::1]:8080, fake.internal",
                                     {5432});
    CHECK_FALSE(refusal(some, "127.0.0.1", 9000, outbound_scope::internet));
    CHECK(refusal(some, "127.0.0.1", 9001, outbound_scope::internet));  // another port
    CHECK(refusal(some, "127.0.0.2", 9000, outbound_scope::internet));
    CHECK_FALSE(refusal(some, "::ffff:127.0.0.1", 9000, outbound_scope::internet));
    CHECK_FALSE(refusal(some, "10.1.200.3", 80, outbound_scope::internet));
    CHECK(refusal(some, "10.2.0.1", 80, outbound_scope::internet));
    CHECK_FALSE(refusal(some, "::1", 8080, outbound_scope::internet));
    CHECK(refusal(some, "::1", 8081, outbound_scope::internet));
    // A host-name entry matches the name in the URL, whatever it resolved to (but never a
    // link-local address or a database port).
    CHECK_FALSE(some.refusal("Fake.Internal", ip("10.9.9.9"), 443, outbound_scope::internet));
    CHECK(some.refusal("fake.internal", ip("169.254.169.254"), 443, outbound_scope::internet));
    CHECK(some.refusal("fake.internal", ip("10.9.9.9"), 5432, outbound_scope::internet));
    CHECK(some.refusal("other.internal", ip("10.9.9.9"), 443, outbound_scope::internet));
}

TEST_CASE("the agent's own host: loopback or its registered address, nothing else",
          "[http][outbound]") {
    const http::outbound_policy p("", {5432, 54343});
    const std::vector<net::ip::address> own = {ip("10.0.0.7")};
    CHECK_FALSE(refusal(p, "127.0.0.1", 9222, outbound_scope::own_host, own));
    CHECK_FALSE(refusal(p, "::1", 9222, outbound_scope::own_host, own));
    CHECK_FALSE(refusal(p, "10.0.0.7", 9222, outbound_scope::own_host, own));
    CHECK_FALSE(refusal(p, "::ffff:10.0.0.7", 9222, outbound_scope::own_host, own));
    for (const char* host : {"10.0.0.8", "8.8.8.8", "192.168.1.1"}) {
        INFO(host);
        auto why = refusal(p, host, 9222, outbound_scope::own_host, own);
        REQUIRE(why);
        CHECK(why->find("own gateway host") != std::string::npos);
    }
    CHECK(refusal(p, "127.0.0.1", 54343, outbound_scope::own_host, own));
    CHECK(refusal(p, "169.254.169.254", 80, outbound_scope::own_host, own));
    const http::outbound_policy wider("10.0.0.0/24", {5432});
    CHECK_FALSE(refusal(wider, "10.0.0.8", 9222, outbound_scope::own_host, own));
}

TEST_CASE("a bad API_OUTBOUND_ALLOW entry is a configuration error naming it", "[http][outbound]") {
    for (const char* bad : {"10.0.0.0/33", "::1/129", "host:0", "host:70000", "[::1", "a b",
                            "example.com/8", "1.2.3.4:x", ":80"}) {
        INFO(bad);
        try {
            http::outbound_policy p(bad, {});
            FAIL("accepted");
        } catch (const awp::core::config_error& e) {
            CHECK(std::string(e.what()).find(bad) != std::string::npos);
        }
    }
    CHECK_NOTHROW(http::outbound_policy(" 10.0.0.0/8 , ,localhost:9222,[::1]:80, fd00::/8", {}));
}

TEST_CASE("the database ports come from the DSNs: URI, key=value, several hosts, default",
          "[http][outbound]") {
    using awp::core::pg::dsn_ports;
    CHECK(dsn_ports("postgresql://u:p@db.example:6543/awp") == std::vector<std::uint16_t>{6543});
    CHECK(dsn_ports("host=/run/pg port=54343 dbname=x") == std::vector<std::uint16_t>{54343});
    CHECK(dsn_ports("postgresql://h1:5433,h2:5434/db") == std::vector<std::uint16_t>{5433, 5434});
    CHECK(dsn_ports("postgresql:///awp?host=/tmp").size() == 1);  // PGPORT or 5432
    CHECK(dsn_ports("not a dsn = =").empty());
}

TEST_CASE("fetch checks every resolved address before it connects", "[http][outbound]") {
    // A listener on loopback that counts connections: a refused fetch never reaches it.
    net::io_context ioc;
    net::ip::tcp::acceptor acc(ioc, {net::ip::make_address("127.0.0.1"), 0});
    const auto port = acc.local_endpoint().port();
    acc.non_blocking(true);
    http::outbound_check check;
    check.policy = http::outbound_policy("", {5432});
    check.scope = outbound_scope::internet;
    std::vector<std::string> seen;
    http::client_request r;
    r.url = "http://localhost:" + std::to_string(port) + "/";
    r.timeout = std::chrono::milliseconds(2000);
    r.check = [&](std::string_view host, const net::ip::address& a, std::uint16_t p) {
        seen.push_back(std::string(host) + "=" + a.to_string());
        check(host, a, p);
    };
    CHECK_THROWS_AS(http::fetch_sync(r), http::outbound_refused);
    REQUIRE(!seen.empty());
    CHECK(seen.front().rfind("localhost=", 0) == 0);
    boost::system::error_code ec;
    net::ip::tcp::socket s(ioc);
    acc.accept(s, ec);
    CHECK(ec == net::error::would_block);  // nothing connected

    // Allowed by the operator: the same request goes through to the listener.
    check.policy = http::outbound_policy("localhost:" + std::to_string(port), {5432});
    r.check = check;
    r.timeout = std::chrono::milliseconds(300);
    CHECK_THROWS_AS(http::fetch_sync(r), http::upstream_error);  // nobody answers
    acc.non_blocking(false);
    acc.accept(s, ec);
    CHECK(!ec);
}

}  // namespace http_outbound_test
