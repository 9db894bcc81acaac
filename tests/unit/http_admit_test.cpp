// The HTTP server's admission of a request before its body (route_options::admit), a route's
// own body deadline, a file answer from an offset (ranges), and the multipart reader's part
// Content-Type: what /storage/v1 builds on.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <boost/asio/use_awaitable.hpp>

#include "awp/http/multipart.hpp"
#include "http_loopback.hpp"

namespace http_admit_test {

namespace {

namespace http = awp::http;
namespace net = boost::asio;
using awp::test::http_loopback::raw;
using awp::test::http_loopback::server;
using std::chrono::milliseconds;

std::atomic<int> g_handled{0};

/// Admits when X-Admit: yes; refuses with 403 otherwise; leaves a note for the handler; a
/// route deadline of 300 ms when X-Short: yes.
net::awaitable<http::admission> admit(http::request& r) {
    http::admission a;
    if (r.header.get("x-admit") != std::optional<std::string_view>("yes")) {
        a.refuse = http::response::error(403, "refused", "not admitted: " + r.param("id"));
        co_return a;
    }
    if (r.header.get("x-throw")) throw http::http_error(429, "busy", "try later");
    r.context = std::make_shared<std::string>("admitted " + r.param("id"));
    if (r.header.get("x-short")) a.body_timeout = milliseconds(300);
    co_return a;
}

net::awaitable<http::response> handler(http::request r) {
    ++g_handled;
    auto note = std::static_pointer_cast<std::string>(r.context);
    auto res = http::response::bytes(200, "text/plain", r.body);
    res.header.add("X-Note", note ? *note : "none");
    co_return res;
}

/// A file of 100 bytes "0123456789..." answered from ?from= for ?n= bytes.
net::awaitable<http::response> ranged(http::request r) {
    char name[] = "/tmp/awp-range-XXXXXX";
    const int fd = ::mkstemp(name);
    ::unlink(name);
    std::string content;
    for (int i = 0; i < 100; ++i) content.push_back(static_cast<char>('0' + i % 10));
    if (::write(fd, content.data(), content.size()) < 0) throw std::runtime_error("write");
    const auto from = std::stoull(r.query_param("from").value_or("0"));
    const auto n = std::stoull(r.query_param("n").value_or("100"));
    co_return http::response::file(206, "text/plain", fd, n, from);
}

http::router routes() {
    http::router r;
    http::route_options o;
    o.body_limit = 1000;
    o.admit = admit;
    r.add("POST", "/admit/:id", handler, o);
    http::route_options slow = o;
    slow.admit = nullptr;
    slow.body_timeout = milliseconds(300);
    r.add("POST", "/slow", handler, slow);
    r.add("GET", "/ranged", ranged);
    return r;
}

http::server_options quiet() {
    http::server_options o;
    o.access_log = false;
    o.body_timeout = milliseconds(10'000);
    return o;
}

}  // namespace

TEST_CASE("server: a route's admission decides before the body is read", "[http][server]") {
    server s(routes(), quiet());
    SECTION("a refusal is answered at once, its body never read, the connection closed") {
        const int before = g_handled;
        raw c(s.port());
        // The header only: were the body awaited, no answer would come.
        REQUIRE(c.send("POST /admit/a1 HTTP/1.1\r\nHost: t\r\nContent-Length: 900\r\n\r\n"));
        auto a = c.read(milliseconds(3000));
        REQUIRE(a);
        CHECK(a->status == 403);
        CHECK(a->body.find("not admitted: a1") != std::string::npos);  // route params are set
        CHECK(c.closed_within(milliseconds(2000)));
        CHECK(g_handled == before);
    }
    SECTION("a refusal comes before the route's own size check, in the admission's words") {
        raw c(s.port());
        REQUIRE(c.send("POST /admit/a2 HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 403);
    }
    SECTION("an admitted request passes its context to the handler; size limits still hold") {
        raw c(s.port());
        REQUIRE(
            c.send("POST /admit/a3 HTTP/1.1\r\nHost: t\r\nX-Admit: yes\r\nContent-Length: "
                   "5\r\n\r\nhello"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 200);
        CHECK(a->body == "hello");
        CHECK(a->has_header("x-note: admitted a3"));
        raw big(s.port());
        REQUIRE(big.send(
            "POST /admit/a4 HTTP/1.1\r\nHost: t\r\nX-Admit: yes\r\nContent-Length: 5000\r\n\r\n"));
        auto b = big.read();
        REQUIRE(b);
        CHECK(b->status == 413);
    }
    SECTION("Expect: 100-continue is not answered for a refused body") {
        raw c(s.port());
        REQUIRE(
            c.send("POST /admit/a5 HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: "
                   "100-continue\r\n\r\n"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 403);
    }
    SECTION("an admission that throws an http_error refuses with it") {
        raw c(s.port());
        REQUIRE(
            c.send("POST /admit/a6 HTTP/1.1\r\nHost: t\r\nX-Admit: yes\r\nX-Throw: "
                   "1\r\nContent-Length: 3\r\n\r\n"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 429);
    }
}

TEST_CASE("server: a body deadline set by the route or its admission is kept", "[http][server]") {
    server s(routes(), quiet());
    SECTION("the route's own deadline (300 ms), shorter than the server's") {
        raw c(s.port());
        REQUIRE(c.send("POST /slow HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
        const auto started = std::chrono::steady_clock::now();
        auto a = c.read(milliseconds(5000));
        REQUIRE(a);
        CHECK(a->status == 408);
        CHECK(std::chrono::steady_clock::now() - started < milliseconds(5000));
    }
    SECTION("the admission's deadline") {
        raw c(s.port());
        REQUIRE(
            c.send("POST /admit/x HTTP/1.1\r\nHost: t\r\nX-Admit: yes\r\nX-Short: "
                   "yes\r\nContent-Length: 10\r\n\r\nabc"));
        auto a = c.read(milliseconds(5000));
        REQUIRE(a);
        CHECK(a->status == 408);
    }
}

TEST_CASE("server: a file answer may start at an offset (a range of the file)", "[http][server]") {
    server s(routes(), quiet());
    raw c(s.port());
    REQUIRE(c.send("GET /ranged?from=95&n=5 HTTP/1.1\r\nHost: t\r\n\r\n"));
    auto a = c.read();
    REQUIRE(a);
    CHECK(a->status == 206);
    CHECK(a->body == "56789");
    CHECK(a->has_header("content-length: 5"));
    REQUIRE(c.send("GET /ranged?from=10&n=3 HTTP/1.1\r\nHost: t\r\n\r\n"));
    auto b = c.read();
    REQUIRE(b);
    CHECK(b->body == "012");
}

TEST_CASE("multipart: a part's Content-Type is reported as sent", "[http][multipart]") {
    http::multipart_reader r("B");
    std::vector<std::optional<std::string>> types;
    r.on_part = [&](const http::multipart_reader::part& p) { types.push_back(p.content_type); };
    r.feed(
        "--B\r\nContent-Disposition: form-data; name=\"cacheControl\"\r\n\r\n3600\r\n"
        "--B\r\ncontent-disposition: form-data; name=\"\"; filename=\"blob\"\r\n"
        "CONTENT-TYPE:   image/png \r\n\r\n\x89PNG\r\n--B--\r\n");
    r.finish();
    REQUIRE(types.size() == 2);
    CHECK_FALSE(types[0].has_value());
    CHECK(types[1] == std::optional<std::string>("image/png"));
}

}  // namespace http_admit_test
