// LISTEN loop on libpq's socket: drain, re-scan, reconnect.
#include "awp/core/notify.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/multiple_exceptions.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"

namespace awp::core {

using namespace net::experimental::awaitable_operators;

listener::listener(listener_options opts, notify_fn on_notify, rescan_fn on_rescan)
    : opts_(std::move(opts)), on_notify_(std::move(on_notify)), on_rescan_(std::move(on_rescan)) {}

void listener::stop() {
    stopping_ = true;
    if (timer_) timer_->cancel();
    if (current_) current_->cancel_wait();
}

net::awaitable<void> listener::run() {
    auto ex = co_await net::this_coro::executor;
    pg::backoff backoff;
    while (!stopping_) {
        const std::string failure = co_await connect_and_serve(ex, backoff);
        if (stopping_) break;
        const auto wait = backoff.next();
        log::warn(connected_ ? "listen connection lost, reconnecting" : "cannot listen, retrying",
                  {{"listener", opts_.name}, {"error", failure}, {"retry_ms", wait.count()}});
        connected_ = false;
        net::steady_timer t(ex, wait);
        timer_ = &t;
        boost::system::error_code ec;
        co_await t.async_wait(net::redirect_error(net::use_awaitable, ec));
        timer_ = nullptr;
    }
    connected_ = false;
}

net::awaitable<std::string> listener::connect_and_serve(net::any_io_executor ex,
                                                        pg::backoff& backoff) {
    // Returns why the connection ended; connection errors never escape the listener.
    try {
        pg::connection conn = co_await pg::connection::async_connect(opts_.dsn);
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
    auto next_poll = net::steady_timer::clock_type::now() + opts_.safety_poll;
    while (!stopping_) {
        for (const auto& n : conn.drain_notifications()) on_notify_(n);
        timer.expires_at(next_poll);
        try {
            auto which =
                co_await (conn.async_wait_readable() || timer.async_wait(net::use_awaitable));
            if (which.index() == 1) {
                next_poll = net::steady_timer::clock_type::now() + opts_.safety_poll;
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

}  // namespace awp::core
