// LISTEN loop on libpq's socket, or the wake relay's stream: drain, re-scan, reconnect.
#include "awp/core/notify.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/multiple_exceptions.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"
#include "awp/core/time.hpp"
#include "awp/core/wake.hpp"

namespace awp::core {

using namespace net::experimental::awaitable_operators;

listener::listener(listener_options opts, notify_fn on_notify, rescan_fn on_rescan)
    : opts_(std::move(opts)), on_notify_(std::move(on_notify)), on_rescan_(std::move(on_rescan)) {}

namespace {
// Both sources' pause between attempts: says why, then waits the back-off; stop() cancels the
// wait through `slot`.
net::awaitable<void> pause_before_retry(pg::backoff& backoff, bool& connected,
                                        net::steady_timer*& slot, const std::string& name,
                                        const std::string& failure, const char* lost,
                                        const char* cannot) {
    const auto wait = backoff.next();
    log::warn(connected ? lost : cannot,
              {{"listener", name}, {"error", failure}, {"retry_ms", wait.count()}});
    connected = false;
    net::steady_timer t(co_await net::this_coro::executor, wait);
    slot = &t;
    boost::system::error_code ec;
    co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
    slot = nullptr;
}
}  // namespace

void listener::stop() {
    stopping_ = true;
    if (timer_) timer_->cancel();
    if (poll_timer_) poll_timer_->cancel();
    if (current_) current_->cancel_wait();
    if (relay_) relay_->cancel();
}

net::awaitable<void> listener::run() {
    if (opts_.relay) {
        co_await run_relay();
        co_return;
    }
    auto ex = co_await net::this_coro::executor;
    pg::backoff backoff;
    while (!stopping_) {
        const std::string failure = co_await connect_and_serve(ex, backoff);
        if (stopping_) break;
        co_await pause_before_retry(backoff, connected_, timer_, opts_.name, failure,
                                    "listen connection lost, reconnecting",
                                    "cannot listen, retrying");
    }
    connected_ = false;
}

net::awaitable<std::string> listener::connect_and_serve(net::any_io_executor ex,
                                                        pg::backoff& backoff) {
    // Returns why the connection ended; connection errors never escape the listener.
    try {
        // A LISTEN session only waits: keepalives notice a server that vanished without a word.
        pg::connection conn =
            co_await pg::connection::async_connect(pg::dsn_with_keepalives(opts_.dsn));
        if (stopping_) co_return std::string();
        for (const auto& ch : opts_.channels) {
            co_await conn.async_exec("LISTEN " + conn.quote_identifier(ch));
        }
        connected_ = true;
        ++connects_;
        backoff.reset();
        log::info("listening", {{"listener", opts_.name},
                                {"channels", static_cast<std::uint64_t>(opts_.channels.size())},
                                {"reconnect", connects_ > 1}});
        current_ = &conn;
        co_await serve(ex, conn);
        current_ = nullptr;
        co_return std::string();
    } catch (const pg::connection_error& e) {
        current_ = nullptr;
        co_return std::string(e.what());
    }
}

net::awaitable<void> listener::serve(net::any_io_executor ex, pg::connection& conn) {
    net::steady_timer timer(ex);
    timer_ = &timer;
    struct clear_timer {
        net::steady_timer*& t;
        ~clear_timer() { t = nullptr; }
    } guard{timer_};
    // Whatever was inserted while we were not listening is only found by looking.
    on_rescan_(rescan_reason::connected);
    auto next_poll = net::steady_timer::clock_type::now() + periodic_wait(opts_.safety_poll);
    while (!stopping_) {
        for (const auto& n : conn.drain_notifications()) on_notify_(n);
        timer.expires_at(next_poll);
        try {
            auto which =
                co_await (conn.async_wait_readable() || timer.async_wait(net::use_awaitable));
            if (which.index() == 1) {
                next_poll = net::steady_timer::clock_type::now() + periodic_wait(opts_.safety_poll);
                on_rescan_(rescan_reason::safety_poll);
            }
        } catch (const boost::system::system_error& e) {
            if (stopping_) co_return;
            if (e.code() != net::error::operation_aborted) {
                throw pg::connection_error(std::string("listen socket: ") + e.what());
            }
        } catch (const net::multiple_exceptions& e) {
            // Both waits failed together: stop() cancels the socket wait and the timer at once.
            if (stopping_) co_return;
            throw pg::connection_error(std::string("listen socket: ") + e.what());
        }
    }
}

// The relay: the stream and the safety poll run side by side, so the poll goes on while the
// relay is away (the database may well be up: a lost wake-up costs at most one poll).
net::awaitable<void> listener::run_relay() {
    co_await (relay_connections() && relay_safety_poll());
    connected_ = false;
}

net::awaitable<void> listener::relay_connections() {
    pg::backoff backoff;
    while (!stopping_) {
        const std::string failure = co_await relay_serve(backoff);
        if (stopping_) break;
        co_await pause_before_retry(backoff, connected_, timer_, opts_.name, failure,
                                    "wake relay stream lost, reconnecting",
                                    "cannot open the wake relay stream, retrying");
    }
}

net::awaitable<std::string> listener::relay_serve(pg::backoff& backoff) {
    // Returns why the stream ended; nothing escapes.
    struct clear_stream {
        relay_stream*& s;
        ~clear_stream() { s = nullptr; }
    } guard{relay_};
    try {
        std::unique_ptr<relay_stream> stream = co_await opts_.relay();
        if (stopping_) co_return std::string();
        relay_ = stream.get();
        const auto silence =
            std::chrono::duration_cast<std::chrono::milliseconds>(wake::kSilenceLimit);
        const auto first = wake::parse_line(co_await stream->read_line(silence));
        if (!first || first->what != wake::line::kind::ready) {
            co_return std::string("the relay's first line is not ready <gateway id>");
        }
        connected_ = true;
        ++connects_;
        backoff.reset();
        log::info("listening", {{"listener", opts_.name},
                                {"relay", true},
                                {"gateway_id", first->channel},
                                {"reconnect", connects_ > 1}});
        // Whatever was inserted while the stream was down is only found by looking.
        on_rescan_(rescan_reason::connected);
        while (!stopping_) {
            const std::string text = co_await stream->read_line(silence);
            const auto l = wake::parse_line(text);
            if (!l || l->what == wake::line::kind::ready) {
                co_return std::string("the relay sent a line outside the protocol");
            }
            if (l->what == wake::line::kind::rescan) {
                on_rescan_(rescan_reason::connected);
            } else if (l->what == wake::line::kind::wake) {
                for (const auto& ch : opts_.channels) {
                    if (ch == l->channel) {
                        on_notify_(pg::notification{l->channel, l->payload, 0});
                        break;
                    }
                }
            }
        }
        co_return std::string();
    } catch (const std::exception& e) {
        co_return std::string(e.what());
    }
}

net::awaitable<void> listener::relay_safety_poll() {
    auto ex = co_await net::this_coro::executor;
    net::steady_timer t(ex);
    poll_timer_ = &t;
    struct clear_timer {
        net::steady_timer*& t;
        ~clear_timer() { t = nullptr; }
    } guard{poll_timer_};
    while (!stopping_) {
        t.expires_after(periodic_wait(opts_.safety_poll));
        boost::system::error_code ec;
        co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
        if (stopping_) break;
        on_rescan_(rescan_reason::safety_poll);
    }
}

}  // namespace awp::core
