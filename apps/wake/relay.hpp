// The wake relay (docs/protocols/wake-relay.md): LISTEN awp_wake once, check each host's login,
// and write each wake-up to the streams of its gateway. It keeps no state of its own: the rows
// are the state, a wake-up is a hint, and a restart (or its own reconnect) makes every host look.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "awp/core/daemon.hpp"
#include "awp/core/event.hpp"
#include "awp/core/notify.hpp"

namespace awp::wake {

namespace net = boost::asio;
namespace pg = core::pg;

struct config {
    core::daemon::common_config common;  // DATABASE_URL: a direct session, for the LISTEN
    /// Where logins are checked (AUTH_DATABASE_URL): its host, port and database, with the
    /// host's user and password. Default DATABASE_URL's.
    std::string auth_database_url;
    std::string bind = "127.0.0.1";
    unsigned short port = 8095;
    std::size_t max_streams = 20000;       // all hosts together
    std::size_t max_gateway_streams = 16;  // one gateway's (its daemons, reconnects)
    double login_cache_s = 300;            // a checked login is trusted this long
    std::size_t login_checks = 4;          // logins checked at once
};

void add_options(core::daemon::cli& cli, config& c);

class relay final : public core::daemon::service {
public:
    relay(net::io_context& ioc, config cfg);
    ~relay() override;

    net::awaitable<void> run() override;
    void request_stop() override;

    /// The bound port (after run() started listening); tests bind port 0.
    unsigned short port() const noexcept { return port_; }
    std::size_t streams() const noexcept { return stream_count_; }
    bool listening() const noexcept { return listener_ && listener_->connected(); }

    struct stream;

private:
    net::awaitable<void> accept_loop();
    net::awaitable<void> serve(net::ip::tcp::socket socket);
    net::awaitable<std::optional<std::string>> check_login(const std::string& user,
                                                           const std::string& password,
                                                           const std::string& gateway_key,
                                                           unsigned& status);
    net::awaitable<void> run_stream(net::ip::tcp::socket& socket, const std::string& gateway_hex,
                                    const std::string& gateway_id);
    void on_notify(const pg::notification& n);
    void broadcast_rescan();

    net::io_context& ioc_;
    config cfg_;
    std::unique_ptr<core::listener> listener_;
    std::unique_ptr<net::ip::tcp::acceptor> acceptor_;
    unsigned short port_ = 0;
    bool stopping_ = false;
    bool listened_once_ = false;
    std::size_t stream_count_ = 0;
    std::unordered_map<std::string, std::vector<std::shared_ptr<stream>>> by_gateway_;
    struct cached_login {
        std::string gateway_id;
        std::chrono::steady_clock::time_point until;
    };
    std::map<std::string, cached_login> logins_;  // sha256(user \0 password) -> gateway
    std::size_t checks_running_ = 0;
    std::size_t checks_waiting_ = 0;
    std::unique_ptr<net::steady_timer> check_done_;  // cancelled when a check ends
};

}  // namespace awp::wake
