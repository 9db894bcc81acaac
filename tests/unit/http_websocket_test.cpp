// awp::http's websocket routes over a real loopback socket: the upgrade and its refusals (426,
// 405, the handler's own answer), messages both ways, the message limit (1009), UTF-8 (1007),
// masking (1002), the bounded outbound queue that closes a client that does not read (1008),
// the idle timeout with pings, the handler's failure (1011) and the server's drain (1001).
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http_loopback.hpp"
#include "support/ws_client.hpp"

namespace http_websocket_test {

namespace http = awp::http;
namespace net = boost::asio;
using awp::test::ws_client;
using namespace awp::test::http_loopback;
using std::chrono::milliseconds;

namespace {

/// What the server side saw, for the assertions.
struct observed {
    std::mutex mu;
    std::size_t max_queued = 0;
    std::uint16_t close_code = 0;
    std::string close_reason;
    std::atomic<bool> ended{false};
    std::atomic<int> refused_sends{0};
};

net::awaitable<void> wait_for(milliseconds d) {
    net::steady_timer t(co_await net::this_coro::executor);
    t.expires_after(d);
    co_await t.async_wait(net::use_awaitable);
}

/// Echoes text; "flood" sends 16 KiB messages until a send is refused; "boom" throws; "bye"
/// closes with 4000.
http::websocket_handler echo(std::shared_ptr<observed> seen) {
    return [seen](http::request r) -> net::awaitable<http::websocket_accept> {
        http::websocket_accept a;
        if (r.query_param("refuse")) {
            a.refusal = http::response::error(401, "unauthenticated", "no key");
            co_return a;
        }
        a.session = [seen](std::shared_ptr<http::websocket> ws) -> net::awaitable<void> {
            while (auto m = co_await ws->read()) {
                if (m->data == "flood") {
                    const std::string chunk(16 * 1024, 'x');
                    for (int i = 0; i < 100000; ++i) {
                        if (!ws->send(chunk)) {
                            ++seen->refused_sends;
                            break;
                        }
                        std::lock_guard lock(seen->mu);
                        seen->max_queued = std::max(seen->max_queued, ws->queued_bytes());
                        if (i % 16 == 0) co_await wait_for(milliseconds(1));
                    }
                } else if (m->data == "boom") {
                    throw std::runtime_error("handler failure with a secret=hunter2");
                } else if (m->data == "bye") {
                    ws->close(4000, "asked to go");
                } else {
                    ws->send((m->binary ? "bin:" : "echo:") + m->data);
                }
            }
            auto [code, reason] = ws->close_reason();
            {
                std::lock_guard lock(seen->mu);
                seen->close_code = code;
                seen->close_reason = reason;
            }
            seen->ended = true;
        };
        co_return a;
    };
}

struct fixture {
    std::shared_ptr<observed> seen = std::make_shared<observed>();
    std::unique_ptr<server> srv;
    explicit fixture(http::websocket_options o = {}) {
        http::router r;
        r.add_websocket("/ws", echo(seen), o);
        r.add("GET", "/plain", [](http::request) -> net::awaitable<http::response> {
            co_return http::response::json(200, "{}");
        });
        http::server_options so;
        so.access_log = false;
        srv = std::make_unique<server>(std::move(r), so);
    }
    bool wait_ended(milliseconds timeout = milliseconds(5000)) const {
        const auto end = clock::now() + timeout;
        while (!seen->ended && clock::now() < end) std::this_thread::sleep_for(milliseconds(5));
        return seen->ended;
    }
};

}  // namespace

TEST_CASE("a websocket route upgrades a GET and carries text and binary messages both ways",
          "[http][websocket]") {
    fixture f;
    ws_client c(f.srv->port(), "/ws?x=1");
    REQUIRE(c.open());
    REQUIRE(c.answer().head.find("upgrade: websocket") != std::string::npos);
    REQUIRE(c.send_text("hello"));
    auto m = c.read_message();
    REQUIRE(m);
    CHECK(m->op == ws_client::text);
    CHECK(m->payload == "echo:hello");
    REQUIRE(c.send_frame(ws_client::binary, std::string("\x00\x01", 2)));
    m = c.read_message();
    REQUIRE(m);
    CHECK(m->payload == std::string("bin:\x00\x01", 6));
    // A message in two frames is one message.
    REQUIRE(c.send_frame(ws_client::text, "frag", false));
    REQUIRE(c.send_frame(ws_client::continuation, "mented", true));
    m = c.read_message();
    REQUIRE(m);
    CHECK(m->payload == "echo:fragmented");
    CHECK(f.srv->connections() == 1);
    // The client's close ends the session's reads.
    REQUIRE(c.send_close(1000, "done"));
    CHECK(c.closed_within(milliseconds(2000)));
    REQUIRE(c.last_close());
    CHECK(c.last_close()->close_code() == 1000);
    REQUIRE(f.wait_ended());
    CHECK(f.seen->close_code == 1000);
}

TEST_CASE(
    "a websocket route answers a GET without the upgrade 426, other methods 405, and a "
    "handler's refusal as HTTP",
    "[http][websocket]") {
    fixture f;
    raw plain(f.srv->port());
    REQUIRE(plain.send("GET /ws HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto a = plain.read();
    REQUIRE(a);
    CHECK(a->status == 426);
    CHECK(a->has_header("upgrade: websocket"));
    REQUIRE(plain.send("POST /ws HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"));
    a = plain.read();
    REQUIRE(a);
    CHECK(a->status == 405);
    CHECK(a->has_header("allow: get"));

    ws_client refused(f.srv->port(), "/ws?refuse=1");
    CHECK(refused.answer().status == 401);
    CHECK(refused.answer().body.find("unauthenticated") != std::string::npos);

    // A bad version is Beast's 426 before the handler; the connection is not upgraded.
    ws_client old(f.srv->port(), "/ws",
                  {{"Upgrade", "websocket"},
                   {"Connection", "Upgrade"},
                   {"Sec-WebSocket-Version", "8"},
                   {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}});
    CHECK_FALSE(old.open());
}

TEST_CASE("a message above the route's limit closes the websocket with 1009", "[http][websocket]") {
    http::websocket_options o;
    o.message_limit = 1024;
    fixture f(o);
    ws_client c(f.srv->port(), "/ws");
    REQUIRE(c.open());
    REQUIRE(c.send_text(std::string(1024, 'a')));  // at the limit: fine
    auto m = c.read_message();
    REQUIRE(m);
    CHECK(m->payload.size() == 1029);
    // Over it in fragments: the sum counts.
    REQUIRE(c.send_frame(ws_client::text, std::string(600, 'b'), false));
    REQUIRE(c.send_frame(ws_client::continuation, std::string(600, 'b'), true));
    m = c.read_message();
    REQUIRE(m);
    CHECK(m->op == ws_client::close_frame);
    CHECK(m->close_code() == 1009);
    REQUIRE(f.wait_ended());
    CHECK(f.seen->close_code == 1009);
}

TEST_CASE("a text message that is not UTF-8 closes with 1007, an unmasked frame with 1002",
          "[http][websocket]") {
    fixture f;
    {
        ws_client c(f.srv->port(), "/ws");
        REQUIRE(c.open());
        REQUIRE(c.send_text("\xC0\xAF"));  // an overlong '/'
        auto m = c.read_message();
        REQUIRE(m);
        CHECK(m->op == ws_client::close_frame);
        CHECK(m->close_code() == 1007);
    }
    REQUIRE(f.wait_ended());
    f.seen->ended = false;
    ws_client c(f.srv->port(), "/ws");
    REQUIRE(c.open());
    REQUIRE(c.send_frame(ws_client::text, "plain", true, false));
    auto m = c.read_message();
    REQUIRE(m);
    CHECK(m->op == ws_client::close_frame);
    CHECK(m->close_code() == 1002);
    REQUIRE(f.wait_ended());
}

TEST_CASE(
    "a client that does not read is closed with 1008 and the server never queues more "
    "than the route's bound for it",
    "[http][websocket]") {
    http::websocket_options o;
    o.queue_limit = 256 * 1024;
    o.write_timeout = milliseconds(1500);
    o.handshake_timeout = milliseconds(500);
    fixture f(o);
    ws_client c(f.srv->port(), "/ws", {}, 4096);  // a small window, never read
    REQUIRE(c.open());
    REQUIRE(c.send_text("flood"));
    REQUIRE(f.wait_ended(milliseconds(10000)));
    CHECK(f.seen->refused_sends == 1);
    CHECK(f.seen->max_queued <= o.queue_limit);
    CHECK(f.seen->max_queued > 0);
    CHECK(f.seen->close_code == 1008);
    CHECK(f.seen->close_reason.find("slow client") != std::string::npos);
    // The connection is gone: the server holds nothing for it.
    const auto end = clock::now() + milliseconds(5000);
    while (f.srv->connections() != 0 && clock::now() < end) {
        std::this_thread::sleep_for(milliseconds(10));
    }
    CHECK(f.srv->connections() == 0);
}

TEST_CASE("an idle websocket is pinged, kept while it answers, and closed when silent",
          "[http][websocket]") {
    http::websocket_options o;
    o.idle_timeout = milliseconds(600);
    fixture f(o);
    ws_client silent(f.srv->port(), "/ws");
    REQUIRE(silent.open());
    // The silent one sees a ping and does not answer: cut after the timeout.
    auto p = silent.read_frame(milliseconds(2000));
    REQUIRE(p);
    CHECK(p->op == ws_client::ping);
    CHECK(silent.closed_within(milliseconds(3000)));
    ws_client live(f.srv->port(), "/ws");
    REQUIRE(live.open());
    // The live one answers pings (read_message does) and is still served after 3 timeouts.
    for (int i = 0; i < 6; ++i) (void)live.read_message(milliseconds(300));
    REQUIRE(live.send_text("still here"));
    auto m = live.read_message();
    REQUIRE(m);
    CHECK(m->payload == "echo:still here");
}

TEST_CASE("a handler that throws closes the websocket with 1011, its text kept out",
          "[http][websocket]") {
    fixture f;
    ws_client c(f.srv->port(), "/ws");
    REQUIRE(c.open());
    REQUIRE(c.send_text("boom"));
    auto m = c.read_message();
    REQUIRE(m);
    CHECK(m->op == ws_client::close_frame);
    CHECK(m->close_code() == 1011);
    CHECK(m->close_reason().find("hunter2") == std::string::npos);
}

TEST_CASE("the handler's close sends its code after what was queued", "[http][websocket]") {
    fixture f;
    ws_client c(f.srv->port(), "/ws");
    REQUIRE(c.open());
    REQUIRE(c.send_text("one"));
    REQUIRE(c.send_text("bye"));
    auto m = c.read_message();
    REQUIRE(m);
    CHECK(m->payload == "echo:one");
    m = c.read_message();
    REQUIRE(m);
    CHECK(m->op == ws_client::close_frame);
    CHECK(m->close_code() == 4000);
    CHECK(m->close_reason() == "asked to go");
    CHECK(c.closed_within(milliseconds(3000)));
}

TEST_CASE("stopping the server closes its websockets with 1001 and run() ends",
          "[http][websocket]") {
    fixture f;
    ws_client a(f.srv->port(), "/ws");
    ws_client b(f.srv->port(), "/ws");
    REQUIRE(a.open());
    REQUIRE(b.open());
    REQUIRE(a.send_text("x"));
    REQUIRE(a.read_message());
    f.srv->stop();
    for (auto* c : {&a, &b}) {
        auto m = c->read_message();
        REQUIRE(m);
        CHECK(m->op == ws_client::close_frame);
        CHECK(m->close_code() == 1001);
        CHECK(c->closed_within(milliseconds(3000)));
    }
    CHECK(f.srv->wait_stopped(milliseconds(5000)));
}

TEST_CASE("a websocket whose client vanishes without a close ends its session",
          "[http][websocket]") {
    fixture f;
    {
        ws_client c(f.srv->port(), "/ws");
        REQUIRE(c.open());
        REQUIRE(c.send_text("x"));
        REQUIRE(c.read_message());
    }  // the TCP connection closes, no close frame
    REQUIRE(f.wait_ended());
    const auto end = clock::now() + milliseconds(3000);
    while (f.srv->connections() != 0 && clock::now() < end) {
        std::this_thread::sleep_for(milliseconds(10));
    }
    CHECK(f.srv->connections() == 0);
}

}  // namespace http_websocket_test
