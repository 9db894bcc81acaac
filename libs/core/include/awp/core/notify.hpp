// A dedicated LISTEN connection: drains every notification, re-scans after each (re)connect and
// on a safety poll, and reconnects with capped back-off when Postgres goes away.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/pg.hpp"

namespace awp::core {

namespace net = boost::asio;

struct listener_options {
    std::string dsn;
    std::vector<std::string> channels;
    std::chrono::milliseconds safety_poll{std::chrono::seconds(30)};
    std::string name = "listener";
};

/// Why the owner should look at its tables again.
enum class rescan_reason { connected, safety_poll };

class listener {
public:
    using notify_fn = std::function<void(const pg::notification&)>;
    using rescan_fn = std::function<void(rescan_reason)>;

    /// on_notify runs for every notification, on_rescan after every LISTEN succeeded (first
    /// connect and each reconnect: notifications sent while down are lost) and each safety poll.
    listener(listener_options opts, notify_fn on_notify, rescan_fn on_rescan);

    /// Runs until stop(). Never throws for database trouble: it logs and reconnects.
    net::awaitable<void> run();
    void stop();
    bool connected() const noexcept { return connected_; }
    /// Count of (re)connects that reached LISTEN; tests and status use it.
    std::uint64_t connects() const noexcept { return connects_; }

private:
    net::awaitable<std::string> connect_and_serve(net::any_io_executor ex, pg::backoff& backoff);
    net::awaitable<void> serve(net::any_io_executor ex, pg::connection& conn);

    listener_options opts_;
    notify_fn on_notify_;
    rescan_fn on_rescan_;
    pg::connection* current_ = nullptr;
    net::steady_timer* timer_ = nullptr;
    bool stopping_ = false;
    bool connected_ = false;
    std::uint64_t connects_ = 0;
};

}  // namespace awp::core
