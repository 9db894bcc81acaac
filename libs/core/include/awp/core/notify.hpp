// A queue's wake-up source: a dedicated LISTEN connection, or a stream from the wake relay
// (awp-wake, core/wake.hpp). Either way it hands on every notification of its channels, re-scans
// after each (re)connect and on a safety poll, and reconnects with capped back-off.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/pg.hpp"

namespace awp::core {

namespace net = boost::asio;

/// One open stream of a wake relay. The transport (HTTP, TLS, the login) is the opener's
/// (http::relay_opener); the protocol is core::wake's, read by the listener.
class relay_stream {
public:
    virtual ~relay_stream() = default;
    /// The next line without its "\n". Throws when the stream ends, fails, or sends nothing
    /// for `silence` (any exception: the listener reconnects).
    virtual net::awaitable<std::string> read_line(std::chrono::milliseconds silence) = 0;
    /// Ends a read in progress (stop()).
    virtual void cancel() = 0;
};
/// Opens a stream (request sent, answer 200); throws when it cannot.
using relay_opener = std::function<net::awaitable<std::unique_ptr<relay_stream>>()>;

struct listener_options {
    /// Where LISTEN connects (WAKE_DATABASE_URL, else DATABASE_URL): a direct session, never a
    /// transaction pooler.
    std::string dsn;
    std::vector<std::string> channels;
    /// At most this long between two looks without a wake-up (each wait is drawn from its last
    /// quarter: core::periodic_wait).
    std::chrono::milliseconds safety_poll{std::chrono::seconds(30)};
    std::string name = "listener";
    /// Set: wake-ups come from the relay (WAKE_URL) instead of LISTEN; dsn is unused.
    relay_opener relay;
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
    net::awaitable<void> run_relay();
    net::awaitable<void> relay_connections();
    net::awaitable<std::string> relay_serve(pg::backoff& backoff);
    net::awaitable<void> relay_safety_poll();

    listener_options opts_;
    notify_fn on_notify_;
    rescan_fn on_rescan_;
    pg::connection* current_ = nullptr;
    relay_stream* relay_ = nullptr;
    net::steady_timer* timer_ = nullptr;
    net::steady_timer* poll_timer_ = nullptr;
    bool stopping_ = false;
    bool connected_ = false;
    std::uint64_t connects_ = 0;
};

}  // namespace awp::core
