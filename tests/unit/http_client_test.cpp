// awp::http::fetch against local servers: any status is a response; a closed port is
// `unreachable`, silence past the deadline `timeout` (the deadline covers the whole exchange),
// garbage or an oversized body `protocol` - the kinds callers map to 502 and 504.
#include <catch2/catch.hpp>

#include "awp/http/client.hpp"
#include "http_loopback.hpp"

namespace http_client_test {

namespace http = awp::http;
namespace net = boost::asio;
using namespace awp::test::http_loopback;
using std::chrono::milliseconds;

namespace {

/// A listening socket served by a thread: `script` runs for each accepted connection.
class fake_upstream {
public:
    template <class F>
    explicit fake_upstream(F script) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::listen(fd_, 16);
        socklen_t len = sizeof a;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this, script] {
            for (;;) {
                pollfd p{fd_, POLLIN, 0};
                if (::poll(&p, 1, 50) <= 0) {
                    if (stop_) return;
                    continue;
                }
                const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
                if (c < 0) continue;
                script(c, stop_);
                ::close(c);
            }
        });
    }
    ~fake_upstream() {
        stop_ = true;
        thread_.join();
        ::close(fd_);
    }
    [[nodiscard]] std::string url(const std::string& path = "/") const {
        return "http://127.0.0.1:" + std::to_string(port_) + path;
    }

private:
    int fd_ = -1;
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

/// Reads until the end of the request's headers (or the peer goes).
void read_request(int c) {
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\n") == std::string::npos) {
        pollfd p{c, POLLIN, 0};
        if (::poll(&p, 1, 2000) <= 0) return;
        const auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) return;
        got.append(buf, static_cast<std::size_t>(n));
    }
}

void write_all(int c, std::string_view s) {
    while (!s.empty()) {
        const auto n = ::send(c, s.data(), s.size(), MSG_NOSIGNAL);
        if (n <= 0) return;
        s.remove_prefix(static_cast<std::size_t>(n));
    }
}

/// Sleeps up to ms, waking early when the upstream is being torn down.
void hold(const std::atomic<bool>& stop, int ms) {
    for (int i = 0; i < ms / 10 && !stop; ++i) std::this_thread::sleep_for(milliseconds(10));
}

std::optional<http::upstream_error::kind> failure_of(http::client_request r) {
    try {
        (void)http::fetch_sync(std::move(r));
    } catch (const http::upstream_error& e) {
        return e.what_kind();
    }
    return std::nullopt;
}

unsigned short closed_port() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);  // bound once, never listened on: connections are refused
    return ntohs(a.sin_port);
}

net::awaitable<http::response> h_echo(http::request r) {
    auto res = http::response::bytes(201, "text/plain", r.method + " " + r.target + " " + r.body);
    res.header.add("X-Seen-Header", std::string(r.header.get("x-custom").value_or("")));
    co_return res;
}

}  // namespace

TEST_CASE("client: URLs are parsed strictly", "[http][client]") {
    auto u = http::parse_url("http://example.com:8080/a/b?c=d");
    REQUIRE(u);
    CHECK(u->scheme == "http");
    CHECK(u->host == "example.com");
    CHECK(u->port == "8080");
    CHECK(u->target == "/a/b?c=d");
    auto bare = http::parse_url("http://127.0.0.1");
    REQUIRE(bare);
    CHECK(bare->port == "80");
    CHECK(bare->target == "/");
    auto v6 = http::parse_url("http://[::1]:9/x");
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK(v6->port == "9");
    for (const std::string bad : {"", "ftp://x/", "http://", "http://user:pw@host/", "http://h:x/",
                                  "http://[::1/", "//host/", "HTTP:/host"}) {
        INFO(bad);
        CHECK_FALSE(http::parse_url(bad).has_value());
    }
}

TEST_CASE("client: any status is a response, method, headers and body go through",
          "[http][client]") {
    http::router r;
    r.add("POST", "/echo", h_echo);
    server s(std::move(r), [] {
        http::server_options o;
        o.access_log = false;
        return o;
    }());
    http::client_request q;
    q.method = "POST";
    q.url = "http://127.0.0.1:" + std::to_string(s.port()) + "/echo?x=1";
    q.header.add("X-Custom", "yes");
    q.body = "payload";
    auto res = http::fetch_sync(q);
    CHECK(res.status == 201);
    CHECK(res.body == "POST /echo?x=1 payload");
    CHECK(res.header.get("x-seen-header") == "yes");

    http::client_request missing;
    missing.url = "http://127.0.0.1:" + std::to_string(s.port()) + "/nowhere";
    auto nf = http::fetch_sync(missing);  // not thrown: the caller decides what 404 means
    CHECK(nf.status == 404);
    CHECK(nf.body.find("not_found") != std::string::npos);
}

TEST_CASE("client: a refused connection is `unreachable`", "[http][client]") {
    http::client_request q;
    q.url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/";
    q.timeout = milliseconds(2000);
    const auto t0 = clock::now();
    CHECK(failure_of(q) == http::upstream_error::kind::unreachable);
    CHECK(clock::now() - t0 < milliseconds(1500));  // refused at once, no waiting for the deadline
}

TEST_CASE("client: silence past the deadline is `timeout`, at the deadline", "[http][client]") {
    SECTION("the upstream accepts and never answers") {
        fake_upstream up([](int c, const std::atomic<bool>& stop) {
            read_request(c);
            hold(stop, 3000);
        });
        http::client_request q;
        q.url = up.url();
        q.timeout = milliseconds(300);
        const auto t0 = clock::now();
        CHECK(failure_of(q) == http::upstream_error::kind::timeout);
        const auto took = clock::now() - t0;
        CHECK(took >= milliseconds(250));
        CHECK(took < milliseconds(2000));
    }
    SECTION("a body trickling in does not extend the deadline") {
        fake_upstream up([](int c, const std::atomic<bool>& stop) {
            read_request(c);
            write_all(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
            for (int i = 0; i < 100 && !stop; ++i) {
                write_all(c, "x");
                std::this_thread::sleep_for(milliseconds(30));
            }
        });
        http::client_request q;
        q.url = up.url();
        q.timeout = milliseconds(400);
        const auto t0 = clock::now();
        CHECK(failure_of(q) == http::upstream_error::kind::timeout);
        CHECK(clock::now() - t0 < milliseconds(2000));
    }
}

TEST_CASE("client: garbage, a cut answer or an oversized body is `protocol`", "[http][client]") {
    SECTION("not HTTP") {
        fake_upstream up([](int c, const std::atomic<bool>&) {
            read_request(c);
            write_all(c, "SSH-2.0-OpenSSH_9.2\r\n\r\n");
        });
        http::client_request q;
        q.url = up.url();
        CHECK(failure_of(q) == http::upstream_error::kind::protocol);
    }
    SECTION("the connection closes in the middle of the body") {
        fake_upstream up([](int c, const std::atomic<bool>&) {
            read_request(c);
            write_all(c, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly part");
        });
        http::client_request q;
        q.url = up.url();
        CHECK(failure_of(q) == http::upstream_error::kind::protocol);
    }
    SECTION("a body larger than body_limit") {
        fake_upstream up([](int c, const std::atomic<bool>&) {
            read_request(c);
            write_all(c,
                      "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n" + std::string(4096, 'z'));
        });
        http::client_request q;
        q.url = up.url();
        q.body_limit = 1024;
        CHECK(failure_of(q) == http::upstream_error::kind::protocol);
        q.body_limit = 8192;
        CHECK(http::fetch_sync(q).body.size() == 4096);
    }
    SECTION("a URL the client cannot call") {
        http::client_request q;
        q.url = "ftp://127.0.0.1/";
        CHECK(failure_of(q) == http::upstream_error::kind::protocol);
    }
}

}  // namespace http_client_test
