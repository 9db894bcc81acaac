// The runner's background upkeep on a connection of its own: the gateway's heartbeat row each
// safety poll, and the secrets files synced on a NOTIFY, a reconnect, every
// SECRETS_SYNC_INTERVAL, and on demand (provision). The decrypted values are kept for redaction.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "awp/core/event.hpp"
#include "awp/core/pg.hpp"
#include "config.hpp"
#include "scrub.hpp"

namespace awp::runner {

class housekeeping {
public:
    /// `auth_flows` counts the logins in progress, for the heartbeat.
    housekeeping(const net::any_io_executor& ex, const runner_config& cfg,
                 std::function<std::size_t()> auth_flows);

    /// The gateway resolved at start-up: every call names it.
    void set_gateway(std::string id, std::string slug, std::string tenant_id);

    /// daemon_heartbeat with the sync state and GATEWAY_API_URL in its meta. Throws the
    /// database's errors (AW003: the gateway is gone).
    net::awaitable<void> heartbeat(core::pg::session& db);
    /// Syncs the secrets files; returns the failure ("" when synced or when sync is off) and
    /// keeps it for the heartbeat (a changed state makes a heartbeat due at once).
    net::awaitable<std::string> sync(core::pg::session& db);
    /// The start-up sync: no periodic one is due after it.
    net::awaitable<void> first_sync(core::pg::session& db);

    /// Heartbeats and syncs as they fall due, until stop().
    net::awaitable<void> run();
    void heartbeat_soon();
    void sync_soon();
    void stop();
    bool done() const noexcept { return done_; }

    bool sync_enabled() const noexcept { return !secrets_key_.empty(); }
    /// "" while the last sync worked.
    const std::string& sync_error() const noexcept { return secrets_error_; }
    const known_secrets& secrets() const noexcept { return secrets_; }

private:
    const runner_config& cfg_;
    std::function<std::size_t()> auth_flows_;
    std::string gateway_id_, slug_, tenant_id_, secrets_key_, started_at_;
    core::pg::session db_;
    core::event wake_;
    known_secrets secrets_;
    bool heartbeat_due_ = true, secrets_due_ = true, stopping_ = false, done_ = false;
    std::chrono::steady_clock::time_point last_sync_{};
    std::string secrets_error_;
};

}  // namespace awp::runner
