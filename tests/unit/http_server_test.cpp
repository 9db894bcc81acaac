// awp::http::server over a real loopback socket: JSON errors, 405 + Allow, body limits and 413,
// Expect: 100-continue, header limits, the header/body/idle timeouts (slow clients cannot hold
// a connection), handler failures, the drain on stop(), and bodies spooled to disk.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include <rapidjson/document.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http_loopback.hpp"

namespace http_server_test {

namespace http = awp::http;
namespace net = boost::asio;
using namespace awp::test::http_loopback;
using std::chrono::milliseconds;

namespace {

net::awaitable<http::response> h_hello(http::request) {
    co_return http::response::json(200, R"({"hello":true})");
}

net::awaitable<http::response> h_echo(http::request r) {
    auto res = http::response::bytes(200, "text/plain", r.body);
    res.header.add("X-Method", r.method);
    res.header.add("X-Param", r.param("id"));
    co_return res;
}

net::awaitable<http::response> h_cached(http::request) {
    auto res = http::response::json(200, "{}");
    res.header.set("Cache-Control", "max-age=60");
    co_return res;
}

net::awaitable<http::response> h_refuse(http::request) {
    http::http_error e(429, "too_many_attempts", "slow down");
    e.extra.add("Retry-After", "7");
    throw e;
    co_return http::response{};
}

net::awaitable<http::response> h_crash(http::request) {
    throw std::runtime_error("secret internals: password=hunter2");
    co_return http::response{};
}

/// The decoded query as "k=v;" pairs, and the raw query, in headers.
net::awaitable<http::response> h_query(http::request r) {
    std::string pairs;
    for (const auto& [k, v] : r.query_params) pairs += k + "=" + v + ";";
    auto res = http::response::bytes(200, "text/plain", pairs);
    res.header.add("X-Raw-Query", r.query);
    co_return res;
}

net::awaitable<http::response> h_slow(http::request) {
    net::steady_timer t(co_await net::this_coro::executor);
    t.expires_after(milliseconds(400));
    co_await t.async_wait(net::use_awaitable);
    co_return http::response::json(200, R"({"slow":true})");
}

http::router routes() {
    http::router r;
    http::route_options tiny;
    tiny.body_limit = 16;
    r.add("GET", "/hello", h_hello);
    r.add("POST", "/hello", h_echo, tiny);
    r.add("POST", "/echo/:id", h_echo, tiny);
    r.add("GET", "/cached", h_cached);
    r.add("GET", "/refuse", h_refuse);
    r.add("GET", "/crash", h_crash);
    r.add("GET", "/slow", h_slow);
    r.add("GET", "/query", h_query);
    http::route_options raw_query;
    raw_query.raw_query = true;
    r.add("GET", "/raw/*rest", h_query, raw_query);
    return r;
}

http::server_options quiet() {
    http::server_options o;
    o.access_log = false;
    return o;
}

std::string error_code(const answer& a) {
    rapidjson::Document d;
    d.Parse(a.body.c_str(), a.body.size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("error")) return "<" + a.body + ">";
    return d["error"]["code"].GetString();
}

std::string get(std::string_view path, std::string_view extra = "") {
    return "GET " + std::string(path) + " HTTP/1.1\r\nHost: t\r\n" + std::string(extra) + "\r\n";
}

}  // namespace

TEST_CASE("server: JSON 404 and 405 with Allow, security headers, HEAD, keep-alive",
          "[http][server]") {
    server s(routes(), quiet());
    raw c(s.port());

    // Several requests on one keep-alive connection.
    REQUIRE(c.send(get("/hello")));
    auto ok = c.read();
    REQUIRE(ok);
    CHECK(ok->status == 200);
    CHECK(ok->body == R"({"hello":true})");
    CHECK(ok->has_header("x-content-type-options: nosniff"));
    CHECK(ok->has_header("x-frame-options: deny"));
    CHECK(ok->has_header("content-security-policy: frame-ancestors 'none'"));
    CHECK(ok->has_header("cache-control: no-store"));
    CHECK_FALSE(ok->has_header("strict-transport-security"));

    REQUIRE(c.send(get("/nowhere")));
    auto nf = c.read();
    REQUIRE(nf);
    CHECK(nf->status == 404);
    CHECK(error_code(*nf) == "not_found");
    CHECK_FALSE(nf->has_header("allow:"));

    REQUIRE(c.send("DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n"));
    auto na = c.read();
    REQUIRE(na);
    CHECK(na->status == 405);
    CHECK(na->has_header("allow: get, post"));
    CHECK(error_code(*na) == "method_not_allowed");

    // A handler's own Cache-Control is kept.
    REQUIRE(c.send(get("/cached")));
    auto cached = c.read();
    REQUIRE(cached);
    CHECK(cached->has_header("cache-control: max-age=60"));
    CHECK_FALSE(cached->has_header("no-store"));

    // HEAD: the GET route's headers, Content-Length of its body, no body bytes.
    REQUIRE(c.send("HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n"));
    auto head = c.read(milliseconds(5000), true);
    REQUIRE(head);
    CHECK(head->status == 200);
    CHECK(head->has_header("content-length: 14"));
    // The next answer starts right away: nothing of the body was sent.
    REQUIRE(c.send(get("/hello", "Connection: close\r\n")));
    auto last = c.read();
    REQUIRE(last);
    CHECK(last->body == R"({"hello":true})");
    CHECK(c.closed_within(milliseconds(2000)));
}

TEST_CASE("server: a malformed %-escape in a ':name' segment is 400, a bad request line 400",
          "[http][server]") {
    server s(routes(), quiet());
    {
        raw c(s.port());
        REQUIRE(c.send("POST /echo/%zz HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 400);
        CHECK(error_code(*a) == "bad_path");
        CHECK(a->body.find("path segment 2 has a malformed %-escape") != std::string::npos);
    }
    {
        raw c(s.port());
        REQUIRE(c.send("THIS IS NOT HTTP\r\n\r\n"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 400);
        CHECK(error_code(*a) == "bad_request");
        CHECK(c.closed_within(milliseconds(2000)));
    }
}

TEST_CASE(
    "server: paths and queries are decoded once, and what is not text is 400 before any handler, "
    "on every route",
    "[http][server]") {
    server s(routes(), quiet());
    raw c(s.port());
    auto ask = [&](const std::string& target) {
        REQUIRE(c.send(get(target)));
        auto a = c.read();
        REQUIRE(a);
        return *a;
    };
    // Invalid UTF-8 in a ':name' segment, in a tail, on a path no route has, on a route that
    // takes no parameter at all: 400 bad_path that says which segment and why.
    for (const std::string target :
         {"/echo/%FF%FE", "/raw/a/%C0%AE", "/nowhere/%FF", "/hello/%00", "/%E2%82"}) {
        INFO(target);
        auto a = ask(target);
        CHECK(a.status == 400);
        CHECK(error_code(a) == "bad_path");
        CHECK(a.body.find("path segment") != std::string::npos);
    }
    auto long_seg = ask("/echo/" + std::string(2000, 'a'));
    CHECK(long_seg.status == 400);
    CHECK(long_seg.body.find("longer than 1024 bytes") != std::string::npos);

    // The query of every route is decoded once for its handler...
    auto q = ask("/query?a=1&b=x+y%2Bz&c=%E2%9C%93");
    CHECK(q.status == 200);
    CHECK(q.body == "a=1;b=x y+z;c=\xE2\x9C\x93;");
    // ...and one that does not decode to text never reaches a handler, even one that ignores it.
    for (const std::string target :
         {"/query?a=%zz", "/query?a=%FF", "/hello?x=%00", "/cached?%C0%AF"}) {
        INFO(target);
        auto a = ask(target);
        CHECK(a.status == 400);
        CHECK(error_code(a) == "bad_query");
        CHECK(a.body.find("query parameter 1") != std::string::npos);
    }
    // A raw_query route gets the query as sent and decodes it itself; its path is still checked
    // and its tail handed on encoded.
    auto r = ask("/raw/a%20b/c?select=a,b&name=like.100%&x=%FF");
    CHECK(r.status == 200);
    CHECK(r.body.empty());
    CHECK(r.has_header("x-raw-query: select=a,b&name=like.100%&x=%ff"));  // head is lower-cased
    // The connection is still good after every refusal.
    CHECK(ask("/hello").status == 200);
}

TEST_CASE("server: bodies over the route's limit are 413 before they are read", "[http][server]") {
    server s(routes(), quiet());
    SECTION("Content-Length over the limit: answered at once, connection closed") {
        raw c(s.port());
        // Only the header is sent: the server must not wait for 100000 bytes.
        REQUIRE(c.send("POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n"));
        auto a = c.read(milliseconds(3000));
        REQUIRE(a);
        CHECK(a->status == 413);
        CHECK(error_code(*a) == "body_too_large");
        CHECK(a->body.find("16 bytes") != std::string::npos);
        CHECK(c.closed_within(milliseconds(2000)));
    }
    SECTION("a chunked body is cut off when it passes the limit") {
        raw c(s.port());
        REQUIRE(
            c.send("POST /hello HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "20\r\n0123456789abcdef0123456789abcdef\r\n0\r\n\r\n"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 413);
        CHECK(c.closed_within(milliseconds(2000)));
    }
    SECTION("within the limit the handler gets the body, chunked or not") {
        raw c(s.port());
        REQUIRE(c.send("POST /echo/abc HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 200);
        CHECK(a->body == "hello");
        CHECK(a->has_header("x-param: abc"));
        REQUIRE(
            c.send("POST /hello HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
        auto b = c.read();
        REQUIRE(b);
        CHECK(b->body == "abcde");
    }
    SECTION("Expect: 100-continue is answered only when the body is welcome") {
        raw c(s.port());
        REQUIRE(
            c.send("POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
                   "Expect: 100-continue\r\n\r\n"));
        auto go = c.read();
        REQUIRE(go);
        CHECK(go->status == 100);
        REQUIRE(c.send("body"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 200);
        CHECK(a->body == "body");

        raw big(s.port());
        REQUIRE(
            big.send("POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n"
                     "Expect: 100-continue\r\n\r\n"));
        auto no = big.read();
        REQUIRE(no);
        CHECK(no->status == 413);  // no 100 Continue first
    }
    SECTION("a body sent to an unknown route is not read as the next request") {
        raw c(s.port());
        REQUIRE(
            c.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nContent-Length: 39\r\n\r\n"
                   "GET /hello HTTP/1.1\r\nHost: smuggled\r\n\r\n"));
        auto a = c.read();
        REQUIRE(a);
        CHECK(a->status == 404);
        CHECK(c.closed_within(milliseconds(2000)));
        CHECK(c.pending().empty());  // no second answer for the smuggled request
    }
}

TEST_CASE("server: oversized headers are 431", "[http][server]") {
    auto o = quiet();
    o.header_limit = 2048;
    server s(routes(), o);
    raw c(s.port());
    REQUIRE(c.send(get("/hello", "X-Big: " + std::string(4096, 'a') + "\r\n")));
    auto a = c.read();
    REQUIRE(a);
    CHECK(a->status == 431);
    CHECK(error_code(*a) == "headers_too_large");
    CHECK(c.closed_within(milliseconds(2000)));
}

TEST_CASE("server: slow clients are cut off by the header, body and idle timeouts",
          "[http][server]") {
    auto o = quiet();
    o.header_timeout = milliseconds(300);
    o.body_timeout = milliseconds(300);
    o.idle_timeout = milliseconds(300);
    server s(routes(), o);

    SECTION("a connection that sends nothing") {
        raw c(s.port());
        const auto t0 = clock::now();
        CHECK(c.closed_within(milliseconds(3000)));
        CHECK(clock::now() - t0 >= milliseconds(250));
        CHECK(c.pending().empty());
    }
    SECTION("headers dribbled a byte at a time do not extend the header deadline") {
        raw c(s.port());
        const auto t0 = clock::now();
        const std::string req = get("/hello", "X-Pad: " + std::string(200, 'p') + "\r\n");
        bool cut = false;
        for (char ch : req) {
            if (!c.send(std::string_view(&ch, 1)) || c.closed_within(milliseconds(20))) {
                cut = true;
                break;
            }
        }
        CHECK(cut);
        CHECK(clock::now() - t0 < milliseconds(2500));
    }
    SECTION("a body that stops arriving is 408") {
        raw c(s.port());
        REQUIRE(c.send("POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
        auto a = c.read(milliseconds(3000));
        REQUIRE(a);
        CHECK(a->status == 408);
        CHECK(error_code(*a) == "timeout");
        CHECK(c.closed_within(milliseconds(2000)));
    }
    SECTION("an idle keep-alive connection is closed") {
        raw c(s.port());
        REQUIRE(c.send(get("/hello")));
        REQUIRE(c.read());
        const auto t0 = clock::now();
        CHECK(c.closed_within(milliseconds(3000)));
        CHECK(clock::now() - t0 >= milliseconds(250));
    }
}

TEST_CASE("server: handler errors become JSON, internals never reach the client",
          "[http][server]") {
    server s(routes(), quiet());
    raw c(s.port());
    REQUIRE(c.send(get("/refuse")));
    auto refused = c.read();
    REQUIRE(refused);
    CHECK(refused->status == 429);
    CHECK(error_code(*refused) == "too_many_attempts");
    CHECK(refused->has_header("retry-after: 7"));
    CHECK(refused->has_header("x-content-type-options: nosniff"));

    REQUIRE(c.send(get("/crash")));
    auto crashed = c.read();
    REQUIRE(crashed);
    CHECK(crashed->status == 500);
    CHECK(error_code(*crashed) == "internal");
    CHECK(crashed->body.find("hunter2") == std::string::npos);
    CHECK(crashed->body.find("secret") == std::string::npos);

    // The connection survives both.
    REQUIRE(c.send(get("/hello")));
    auto ok = c.read();
    REQUIRE(ok);
    CHECK(ok->status == 200);
}

TEST_CASE("server: stop() finishes requests in flight and closes idle connections",
          "[http][server]") {
    server s(routes(), quiet());
    const auto port = s.port();
    raw idle(port);
    REQUIRE(idle.send(get("/hello")));
    REQUIRE(idle.read());
    raw busy(port);
    REQUIRE(busy.send(get("/slow")));
    std::this_thread::sleep_for(milliseconds(100));  // the slow handler is running
    s.stop();
    CHECK(idle.closed_within(milliseconds(1000)));
    auto a = busy.read(milliseconds(3000));
    REQUIRE(a);
    CHECK(a->status == 200);
    CHECK(a->body == R"({"slow":true})");
    CHECK(a->has_header("connection: close"));
    CHECK(s.wait_stopped(milliseconds(3000)));
    // New connections are refused once the server has stopped.
    bool refused = false;
    try {
        raw late(port);
        refused = !late.send(get("/hello")) || !late.read(milliseconds(1000));
    } catch (const std::exception&) {
        refused = true;
    }
    CHECK(refused);
}

namespace {

/// A spooled body read back from its file, and where the file is.
http::response spooled_echo(const http::request& r) {
    if (!r.body_file) return http::response::error(500, "not_spooled", "no body file");
    std::string back(static_cast<std::size_t>(r.body_file->size()), '\0');
    std::size_t got = 0;
    while (got < back.size()) {
        const auto n = ::pread(r.body_file->fd(), back.data() + got, back.size() - got,
                               static_cast<off_t>(got));
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    back.resize(got);
    struct stat st {};
    ::fstat(r.body_file->fd(), &st);
    char where[512] = {};
    const auto n = ::readlink(("/proc/self/fd/" + std::to_string(r.body_file->fd())).c_str(), where,
                              sizeof where - 1);
    auto res = http::response::bytes(200, "application/octet-stream", back);
    res.header.add("X-Memory-Body", std::to_string(r.body.size()));
    res.header.add("X-Links", std::to_string(st.st_nlink));
    res.header.add("X-Where", n > 0 ? std::string(where, static_cast<std::size_t>(n)) : "?");
    return res;
}

net::awaitable<http::response> h_spooled(http::request r) { co_return spooled_echo(r); }

http::router spool_routes(const std::string& dir) {
    http::router r;
    http::route_options spool;
    spool.body_limit = 200'000;
    spool.spool_body = true;
    spool.spool_dir = dir;
    r.add("POST", "/spool", h_spooled, spool);
    spool.spool_dir = dir + "/missing";
    r.add("POST", "/nowhere", h_spooled, spool);
    return r;
}

}  // namespace

TEST_CASE("server: a spool_body route gets its body in an unlinked file, limits and timeouts kept",
          "[http][server]") {
    char tmpl[] = "/tmp/awp-spool-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string dir = tmpl;
    auto o = quiet();
    o.body_timeout = milliseconds(300);
    {
        server s(spool_routes(dir), o);
        std::string big(150'000, 'x');  // more than one 64 KiB piece
        for (std::size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>('a' + i % 26);
        SECTION("fixed length, and a second request pipelined on the same connection") {
            raw c(s.port());
            REQUIRE(c.send("POST /spool HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                           std::to_string(big.size()) + "\r\n\r\n" + big +
                           "POST /spool HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nend"));
            auto a = c.read();
            REQUIRE(a);
            CHECK(a->status == 200);
            CHECK(a->body == big);
            CHECK(a->has_header("x-memory-body: 0"));
            CHECK(a->has_header("x-links: 0"));  // never linked into a directory
            std::string lower_dir = dir;         // the answer's head is lower-cased
            for (auto& ch : lower_dir)
                ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            CHECK(a->head.find("x-where: " + lower_dir + "/") != std::string::npos);
            auto b = c.read();
            REQUIRE(b);
            CHECK(b->status == 200);
            CHECK(b->body == "end");
        }
        SECTION("chunked, and empty") {
            raw c(s.port());
            std::string chunked =
                "POST /spool HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
            for (std::size_t i = 0; i < big.size(); i += 40'000) {
                const auto piece = big.substr(i, 40'000);
                char len[16];
                std::snprintf(len, sizeof len, "%zx", piece.size());
                chunked += std::string(len) + "\r\n" + piece + "\r\n";
            }
            chunked += "0\r\n\r\n";
            REQUIRE(c.send(chunked));
            auto a = c.read();
            REQUIRE(a);
            CHECK(a->status == 200);
            CHECK(a->body == big);
            REQUIRE(c.send("POST /spool HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
            auto e = c.read();
            REQUIRE(e);
            CHECK(e->status == 200);
            CHECK(e->body.empty());
        }
        SECTION("over the limit, declared or chunked: 413 and the connection closed") {
            raw c(s.port());
            REQUIRE(c.send("POST /spool HTTP/1.1\r\nHost: t\r\nContent-Length: 200001\r\n\r\n"));
            auto a = c.read();
            REQUIRE(a);
            CHECK(a->status == 413);
            CHECK(c.closed_within(milliseconds(2000)));
            raw d(s.port());
            REQUIRE(
                d.send("POST /spool HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
            for (int i = 0; i < 5; ++i) {
                if (!d.send("ea60\r\n" + std::string(60'000, 'z') + "\r\n")) break;
            }
            auto b = d.read();
            REQUIRE(b);
            CHECK(b->status == 413);
            CHECK(error_code(*b) == "body_too_large");
            CHECK(d.closed_within(milliseconds(2000)));
        }
        SECTION("a body that stops arriving is 408") {
            raw c(s.port());
            REQUIRE(c.send("POST /spool HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
            auto a = c.read(milliseconds(3000));
            REQUIRE(a);
            CHECK(a->status == 408);
            CHECK(c.closed_within(milliseconds(2000)));
        }
        SECTION("no place to spool: 503, not a crash") {
            raw c(s.port());
            REQUIRE(c.send("POST /nowhere HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"));
            auto a = c.read();
            REQUIRE(a);
            CHECK(a->status == 503);
            CHECK(error_code(*a) == "unavailable");
        }
    }
    // Nothing is left in the spool directory.
    CHECK(::rmdir(dir.c_str()) == 0);
}

}  // namespace http_server_test
