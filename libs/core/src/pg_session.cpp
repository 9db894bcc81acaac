// The reconnecting session, its back-off and the blocking transaction guard (awp/core/pg.hpp):
// what a daemon holds a connection through.
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "awp/core/log.hpp"
#include "awp/core/pg.hpp"
#include "awp/core/time.hpp"

namespace awp::core::pg {

// ---- backoff, session, transaction --------------------------------------------------------

std::chrono::milliseconds backoff::next() {
    const auto base = next_;
    next_ = std::min(cap_, next_ * 2);
    // Up to 25% jitter so a fleet of daemons does not reconnect in lockstep.
    return random_wait(base, base + base / 4);
}

net::awaitable<connection*> session::get() {
    if (conn_.is_open()) co_return &conn_;
    auto ex = co_await net::this_coro::executor;
    for (;;) {
        std::string failure;
        try {
            conn_ = co_await connection::async_connect(dsn_);
            if (gateway_key_) conn_.set_gateway_key(*gateway_key_);
            backoff_.reset();
            co_return &conn_;
        } catch (const connection_error& e) {
            failure = e.what();
        }
        const auto wait = backoff_.next();
        log::warn("database unavailable, retrying",
                  {{"connection", name_}, {"error", failure}, {"retry_ms", wait.count()}});
        net::steady_timer t(ex, wait);
        co_await t.async_wait(net::use_awaitable);
    }
}

net::awaitable<result> session::exec(std::string sql, params p, bool retry, bool prepared) {
    for (int attempt = 0;; ++attempt) {
        connection* c = co_await get();
        try {
            if (prepared) co_return co_await c->async_exec_prepared(sql, p);
            co_return co_await c->async_exec(sql, p);
        } catch (const connection_error&) {
            reset();
            if (!retry || attempt > 0) throw;
        }
    }
}

transaction::transaction(connection& c) : c_(c) { c_.exec("BEGIN"); }

transaction::~transaction() {
    if (!done_) {
        try {
            c_.exec("ROLLBACK");
        } catch (...) {  // a broken connection rolls back by itself
        }
    }
}

void transaction::commit() {
    c_.exec("COMMIT");
    done_ = true;
}

}  // namespace awp::core::pg
