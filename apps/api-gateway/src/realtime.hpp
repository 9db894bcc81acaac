// Realtime in the gateway (issue 33; docs/realtime.md): the websocket route
// /realtime/v1/websocket where realtime-js joins channels with postgres_changes bindings, the
// sink the change capture hands each committed transaction to (visibility decided once per
// distinct (role, claims) group and table under row-level security, on the gateway's pool),
// the sweep that disconnects sockets whose token expired or was signed out, and /api/health's
// `realtime` object.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/http/websocket.hpp"
#include "awp/realtime/capture.hpp"
#include "awp/realtime/change.hpp"
#include "realtime_policy.hpp"

namespace awp::api {

namespace net = boost::asio;

class gateway;
struct realtime_socket;
struct realtime_token;
struct data_principal;

/// REALTIME_* settings (gateway_config holds them; gateway.cpp adds the options).
struct realtime_config {
    bool enabled = true;       ///< REALTIME (off: no route, no capture)
    std::string database_url;  ///< REALTIME_DATABASE_URL: the REPLICATION login
    /// REALTIME_SLOT: the prefix of this process's slot, <slot>_<instance> (docs/realtime-
    /// capture.md, "Several gateways")
    std::string slot = "awp_realtime";
    /// REALTIME_INSTANCE: this gateway's part of the slot's name; "" = from the host name and
    /// API_PORT, so a gateway that comes back on the same host and port resumes its slot
    std::string instance;
    /// REALTIME_SLOT_ABANDON: another gateway's slot of this prefix found inactive this long
    /// (seconds) is dropped; 0 = never
    double slot_abandon_s = 900;
    std::string publication = "awp_realtime";  ///< REALTIME_PUBLICATION
    std::size_t max_sockets = 10'000;          ///< REALTIME_MAX_SOCKETS (this process)
    std::size_t max_channels = 100;            ///< REALTIME_MAX_CHANNELS per socket
    std::size_t max_bindings = 100;            ///< REALTIME_MAX_BINDINGS per channel
    std::size_t message_limit = 64 * 1024;     ///< REALTIME_MESSAGE_LIMIT bytes from a client
    std::size_t queue_limit = 1024 * 1024;     ///< REALTIME_QUEUE_LIMIT bytes queued per socket
    double joins_per_second = 10;              ///< REALTIME_JOINS_PER_SECOND per socket (burst 2x)
    double idle_timeout_s = 60;                ///< REALTIME_IDLE_TIMEOUT
    /// REALTIME_HEARTBEAT_TIMEOUT: no Phoenix message (realtime-js sends a heartbeat every 25 s)
    /// for this long and the socket is closed, websocket pongs or not
    double heartbeat_timeout_s = 60;
    std::size_t max_sockets_per_address = 1000;  ///< REALTIME_MAX_SOCKETS_PER_ADDRESS (0: none)
    std::size_t max_sockets_per_user = 100;      ///< REALTIME_MAX_SOCKETS_PER_USER (0: none)
    double token_check_s = 1;  ///< how often tokens are checked for expiry and sign-out
};

class realtime_hub {
public:
    realtime_hub(gateway& g, net::io_context& ioc, realtime_config cfg);
    ~realtime_hub();
    realtime_hub(const realtime_hub&) = delete;
    realtime_hub& operator=(const realtime_hub&) = delete;

    /// The route's handler: the upgrade is refused (401 without a valid apikey, 400 for an
    /// unknown vsn, 503 past max_sockets) or runs a Phoenix socket.
    http::websocket_handler handler();
    [[nodiscard]] http::websocket_options socket_options() const;

    /// The capture's sink: each change goes to every channel whose binding matches and whose
    /// (role, claims) may see it; returns once all of it is queued to the sockets.
    net::awaitable<void> deliver(realtime::transaction tx);

    /// Starts the capture (when REALTIME_DATABASE_URL is set) and the token sweep.
    void start();
    void stop();
    /// After stop(): until the capture's coroutine has ended (at most `limit`).
    net::awaitable<void> wait_stopped(std::chrono::milliseconds limit);

    /// /api/health's `realtime` object: sockets, channels, the capture's state and slot figures.
    [[nodiscard]] std::string health_json() const;
    /// What anyone may read of it: enabled and the capture's state, no figures.
    [[nodiscard]] std::string public_health_json() const;

    /// Called by a socket's session (realtime_socket.cpp).
    void add(const std::shared_ptr<realtime_socket>& s);
    void remove(const std::shared_ptr<realtime_socket>& s);
    [[nodiscard]] const realtime_config& config() const noexcept { return cfg_; }
    gateway& owner() noexcept { return g_; }
    std::atomic<std::size_t> channels{0};
    std::atomic<std::uint64_t> delivered{0};     ///< events queued to sockets
    std::atomic<std::uint64_t> checks{0};        ///< visibility statements whose answers were used
    std::atomic<std::uint64_t> commit_waits{0};  ///< checks run again: the commit not yet seen

    /// A transaction delivered to at least one socket: its commit (Postgres' commit time, µs
    /// since 2000-01-01) to now, when its events are queued to the sockets' writers. The
    /// server's part of a live row's latency (the socket's write and the client's reading come
    /// after); /api/health reports the last kLagWindow's p50 / p99 / max.
    void record_lag(std::int64_t commit_time);
    static constexpr std::size_t kLagWindow = 2048;

    /// The slot this process reads: <slot>_<instance>, a valid slot name (a-z, 0-9, _; at most
    /// 63 bytes). Throws core::config_error for a prefix or instance that cannot make one.
    [[nodiscard]] static std::string slot_name(const realtime_config& cfg, unsigned short api_port);

    /// Sockets of one client address, and of one user (a channel's token's sub), now.
    [[nodiscard]] std::size_t sockets_of_address(const std::string& address) const;
    /// Counts `s` for `user` (its first channel as that user); false when the user holds
    /// max_sockets_per_user sockets already.
    bool claim_user(const std::shared_ptr<realtime_socket>& s, const std::string& user);
    /// The token of a socket's apikey, verified (`who`): the same object for every socket that
    /// presents the same key.
    std::shared_ptr<const realtime_token> apikey_token(const std::string& apikey,
                                                       const data_principal& who);

private:
    net::awaitable<void> sweep();
    net::awaitable<void> session(std::shared_ptr<http::websocket> ws,
                                 std::shared_ptr<realtime_socket> s);

    gateway& g_;
    net::io_context& ioc_;
    realtime_config cfg_;
    std::string slot_;  ///< slot_name(cfg_, API_PORT)
    mutable std::mutex mu_;
    std::set<std::shared_ptr<realtime_socket>> sockets_;
    mutable std::mutex lag_mu_;
    std::vector<std::int64_t> lag_us_;  ///< a ring of kLagWindow, under lag_mu_
    std::size_t lag_next_ = 0;          ///< under lag_mu_
    std::map<std::string, std::size_t, std::less<>> per_address_;  ///< under mu_
    std::map<std::string, std::size_t, std::less<>> per_user_;     ///< under mu_
    std::map<std::string, std::shared_ptr<const realtime_token>, std::less<>> apikeys_;  ///< mu_
    realtime_policies policies_;
    std::unique_ptr<realtime::capture> capture_;
    std::unique_ptr<net::steady_timer> sweep_timer_;
    std::shared_ptr<std::atomic<bool>> capture_done_ = std::make_shared<std::atomic<bool>>(true);
    std::shared_ptr<std::atomic<bool>> sweep_done_ = std::make_shared<std::atomic<bool>>(true);
    std::atomic<bool> stopping_{false};
};

}  // namespace awp::api
